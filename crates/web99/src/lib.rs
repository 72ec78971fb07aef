//! The SPECweb99 workload as data and arithmetic, shared by the server's dynamic API
//! and the benchmark harness ([docs/web99.md](../../../docs/web99.md); cited
//! as `web99.md` §N in this crate).
//!
//! # Layout
//!
//! - [`fileset`]: directory count for a load, file names and sizes, the exact file
//!   contents `wafgen99` writes, and their verification.
//! - [`ads`]: `upfgen99` and `cadgen99` (User.Personality, Custom.Ads), the ad
//!   search and the in-place tag rewrite of a custom-ad-rotation GET.
//! - [`postlog`]: the 139-byte POST log records, the count line, and the checks the
//!   manager makes on a fetched log (also used to repair a torn tail).
//! - [`request`]: the query string, `my_cookie`, the POST form, and the HTML
//!   wrapper of every dynamic answer.
//! - [`workload`]: the client side: the kit's random generator and Zipf sampler,
//!   decks with exact class proportions, request types, keep-alive sizes, and the
//!   exact request bytes.
//! - [`manager`]: the manager's arithmetic on its client list: the Reset's
//!   `maxthread`.
//! - [`metrics`]: rated receive (the 400 kbit/s pacing), the per-class counters,
//!   valid and conforming generators, the per-client error check, the run-level
//!   numbers and the median iteration.
//!
//! # What it does not do
//!
//! No I/O beyond what callers hand it: writing files, serving requests and pacing
//! clients live in `stoa` (the `fileset` command), `stoa-web` and the harness.

pub mod ads;
pub mod fileset;
pub mod manager;
pub mod metrics;
pub mod postlog;
pub mod request;
pub mod workload;
