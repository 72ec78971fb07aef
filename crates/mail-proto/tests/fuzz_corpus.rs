//! Replays the committed fuzz corpus (`fuzz/corpus/mail_lines`) through the fuzz
//! target, so every input the fuzzer kept is also a regression test under plain
//! `cargo test`.

use stoa_mail_proto::fuzzing;
use stoa_testkit::fuzz::replay;

#[test]
fn lines_corpus() {
    assert!(replay("mail_lines", fuzzing::lines) > 0);
}
