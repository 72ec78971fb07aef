//! Replays the committed fuzz corpus (`fuzz/corpus/smtp_*`) through the fuzz targets,
//! so every input the fuzzer kept is also a regression test under plain `cargo test`.

use stoa_smtp_proto::fuzzing;
use stoa_testkit::fuzz::replay;

#[test]
fn session_corpus() {
    assert!(replay("smtp_session", fuzzing::session) > 0);
}

/// The SMTP sessions again, spoken to an LMTP store host (EHLO refused, LHLO
/// where a sample has it, one reply per recipient at the end of a message).
#[test]
fn lmtp_session_corpus() {
    assert!(replay("smtp_session", fuzzing::lmtp_session) > 0);
}

#[test]
fn data_corpus() {
    assert!(replay("smtp_data", fuzzing::data) > 0);
}

#[test]
fn command_corpus() {
    assert!(replay("smtp_command", fuzzing::command) > 0);
}

#[test]
fn reply_corpus() {
    assert!(replay("smtp_reply", fuzzing::reply) > 0);
}
