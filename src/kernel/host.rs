//! Host fingerprint (todo).
