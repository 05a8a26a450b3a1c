//! Readers of /proc and /sys. Every reader takes a root so tests can point it at fixtures.
