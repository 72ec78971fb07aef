//! The crash points, with the `failpoints` feature
//! (`cargo test -p stoa-smtp --features failpoints`): an I/O error at each point of
//! the commit answers `451 4.3.0` and leaves no trace; an error after the commit
//! (before the `250`, or before the queue removal) loses nothing: the message is
//! delivered, at worst twice.
//!
//! The points are process-wide, so everything runs in one test, in order.

#![cfg(feature = "failpoints")]

mod common;

use stoa_testkit::wait_until;

use common::{Client, JOE, MailDir, Running};

const MESSAGE: &str = "Subject: crash test\r\n\r\nx\r\n";

#[test]
fn crash_points() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    for point in [
        "queue::after_write_before_fsync",
        "queue::after_fsync_before_rename",
        "queue::after_rename_before_dir_fsync",
    ] {
        fail::cfg(point, "return").expect("configure the failpoint");
        let mut c = Client::ehlo(server.mx);
        c.mail("a@ext.test", &[JOE], MESSAGE).assert(451, "4.3.0");
        fail::remove(point);
        assert!(
            mail.queue_files().is_empty(),
            "{point}: {:?}",
            mail.queue_files()
        );
        c.mail("a@ext.test", &[JOE], MESSAGE).assert(250, "queued");
    }
    let got = mail.wait_delivered(JOE, 3);
    assert_eq!(got.len(), 3);
    mail.wait_queue_empty();

    // The removal after delivery fails once: the message is delivered again (at
    // least once), then removed.
    fail::cfg("deliver::before_queue_remove", "1*return").expect("configure");
    let mut c = Client::ehlo(server.mx);
    c.mail("a@ext.test", &[JOE], MESSAGE).assert(250, "queued");
    mail.wait_queue_empty();
    fail::remove("deliver::before_queue_remove");
    assert_eq!(mail.delivered(JOE).len(), 5, "delivered twice, not lost");

    // Durable but unacknowledged: the client is told 451 (and would retry); the
    // copy on disk is delivered after a restart.
    fail::cfg("smtp::before_250", "return").expect("configure");
    let mut c = Client::ehlo(server.mx);
    c.mail("a@ext.test", &[JOE], MESSAGE).assert(451, "4.3.0");
    fail::remove("smtp::before_250");
    assert!(mail.queue_files().iter().any(|f| f.ends_with(".env")));
    drop(c);
    drop(server);
    let _server = Running::start(&mail, mail.config());
    assert!(wait_until(common::DELIVERY_TIMEOUT, || mail
        .delivered(JOE)
        .len()
        == 6));
    mail.wait_queue_empty();
}
