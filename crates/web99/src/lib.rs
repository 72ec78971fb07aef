//! The SPECweb99 workload as data and arithmetic, shared by the server's dynamic API
//! and the benchmark harness (`../shared/specs/web99.md`).
//!
//! # Layout
//!
//! - [`fileset`]: directory count for a load, file names and sizes, the exact file
//!   contents `wafgen99` writes, and their verification.
//!
//! # What it does not do
//!
//! No I/O beyond what callers hand it: writing files, serving requests and pacing
//! clients live in `stoa` (the `fileset` command), `stoa-web` and the harness.

pub mod fileset;
