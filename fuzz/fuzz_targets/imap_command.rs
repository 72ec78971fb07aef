//! IMAP command stream on arbitrary bytes; see `stoa_imap_proto::fuzzing::session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_imap_proto::fuzzing::session(data));
