//! Network traffic tacho watches itself (as opposed to the kernel's counters in `kernel`):
//! DNS queries and answers captured with a packet socket.

pub mod capture;
pub mod dns;
