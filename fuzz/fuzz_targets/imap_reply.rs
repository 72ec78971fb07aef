//! IMAP server response lines as a client reads them; see
//! `stoa_imap_proto::fuzzing::reply_line`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_imap_proto::fuzzing::reply_line(data));
