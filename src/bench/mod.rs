//! The storage benchmark: suites, plans, targets, the run loop, results and verdicts.

pub mod backing;
pub mod derive;
pub mod fio_cmd;
pub mod fiojob;
pub mod honesty;
pub mod hostcache;
pub mod like;
pub mod ping;
pub mod plan;
pub mod result;
pub mod run;
pub mod session;
pub mod suite;
pub mod sustained;
pub mod target;
pub mod testfile;
pub mod verdict;
