//! What tacho may write to: signatures on block devices, mounted and held devices.
