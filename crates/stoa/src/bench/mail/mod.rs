//! `stoa bench mail`: the SPECmail2001-style harness (`mail2001.md` §1–§4).
// Being assembled: the engine and CLI land next.
#![allow(dead_code)]

mod report;
mod run;
