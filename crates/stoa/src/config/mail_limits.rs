//! The limit keys the mail servers' tables share, read and checked in one place:
//! `max_connections` and `max_connections_per_client` (every mail server), and the
//! message limits and deadlines of the SMTP dialects (`[smtp]` and `[lmtp]`, both
//! a `stoa_smtp::config::Limits`). Every key and message is named after the
//! table's prefix (`smtp.`, `lmtp.`), so each table still reports in its own
//! words, and each helper reads or checks its keys in the order the tables always
//! did, which is the order their errors are reported in; the SMTP dialects'
//! keys print alike too.

use stoa_smtp::config::Limits;
use toml::Table;

use super::Report;

/// The keys [`Report::smtp_limits`] reads, for the known keys of a table that
/// uses it.
pub(super) const SMTP_LIMIT_KEYS: &[&str] = &[
    "max_message_size",
    "max_recipients",
    "max_connections",
    "max_connections_per_client",
    "command_timeout",
    "data_timeout",
    "session_timeout",
    "send_timeout",
];

impl Report {
    /// `max_connections` and `max_connections_per_client` of the table `t`, whose
    /// keys are named after `path`.
    pub(super) fn connection_limits(
        &mut self,
        t: &Table,
        path: &str,
        max_connections: &mut usize,
        per_client: &mut usize,
    ) {
        self.integer_into(t, path, "max_connections", max_connections);
        self.integer_into(t, path, "max_connections_per_client", per_client);
    }

    /// `max_connections` is at least 1 (0 would accept nothing).
    pub(super) fn check_max_connections(&mut self, path: &str, max_connections: usize) {
        self.check(
            max_connections != 0,
            &format!("{path}max_connections: must be at least 1"),
        );
    }

    /// The SMTP dialects' limits of the table `t`: `max_message_size`,
    /// `max_recipients`, the connection limits, then `command_timeout`,
    /// `data_timeout`, `session_timeout` and `send_timeout`.
    pub(super) fn smtp_limits(&mut self, t: &Table, path: &str, l: &mut Limits) {
        self.size(t, path, "max_message_size", &mut l.session.max_message_size);
        self.integer_into(t, path, "max_recipients", &mut l.session.max_recipients);
        let per_client = &mut l.max_connections_per_client;
        self.connection_limits(t, path, &mut l.max_connections, per_client);
        self.duration(t, path, "command_timeout", &mut l.command_timeout);
        self.duration(t, path, "data_timeout", &mut l.data_timeout);
        self.duration(t, path, "session_timeout", &mut l.session_timeout);
        self.duration(t, path, "send_timeout", &mut l.send_timeout);
    }

    /// What [`Report::smtp_limits`] read: a message size and recipients above
    /// zero, a connection at least, and no deadline of zero.
    pub(super) fn check_smtp_limits(&mut self, path: &str, l: &Limits) {
        self.check(
            l.session.max_message_size != 0,
            &format!("{path}max_message_size: must be more than zero"),
        );
        self.check(
            l.session.max_recipients != 0,
            &format!("{path}max_recipients: must be at least 1"),
        );
        self.check_max_connections(path, l.max_connections);
        self.nonzero(
            path,
            &[
                ("command_timeout", l.command_timeout),
                ("data_timeout", l.data_timeout),
                ("session_timeout", l.session_timeout),
                ("send_timeout", l.send_timeout),
            ],
        );
    }
}

/// The keys of [`SMTP_LIMIT_KEYS`] as `stoa check-config` prints them, for
/// `[smtp]` and `[lmtp]`.
pub(super) fn print(doc: &mut super::print::Doc, l: &Limits) {
    use super::print::{duration, int, size};
    doc.set("max_message_size", size(l.session.max_message_size));
    doc.set("max_recipients", int(l.session.max_recipients));
    doc.set("max_connections", int(l.max_connections));
    doc.set(
        "max_connections_per_client",
        int(l.max_connections_per_client),
    );
    doc.set("command_timeout", duration(l.command_timeout));
    doc.set("data_timeout", duration(l.data_timeout));
    doc.set("session_timeout", duration(l.session_timeout));
    doc.set("send_timeout", duration(l.send_timeout));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn table(text: &str) -> Table {
        text.parse().expect("TOML")
    }

    #[test]
    fn every_key_is_read_under_the_tables_prefix() {
        let t = table(
            "max_message_size = \"2K\"\nmax_recipients = 3\nmax_connections = 4\n\
             max_connections_per_client = 5\ncommand_timeout = \"6s\"\ndata_timeout = \"7s\"\n\
             session_timeout = \"8s\"\nsend_timeout = \"9s\"\n",
        );
        let (mut r, mut l) = (Report::default(), Limits::default());
        r.smtp_limits(&t, "lmtp.", &mut l);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        r.known_keys(&t, "lmtp.", SMTP_LIMIT_KEYS);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(l.session.max_message_size, 2048);
        assert_eq!(l.session.max_recipients, 3);
        assert_eq!((l.max_connections, l.max_connections_per_client), (4, 5));
        let secs = Duration::from_secs;
        assert_eq!(l.command_timeout, secs(6));
        assert_eq!(l.data_timeout, secs(7));
        assert_eq!(l.session_timeout, secs(8));
        assert_eq!(l.send_timeout, secs(9));
    }

    #[test]
    fn zeros_are_reported_in_order_with_the_prefix() {
        let l = Limits {
            max_connections: 0,
            command_timeout: Duration::ZERO,
            send_timeout: Duration::ZERO,
            ..Limits::default()
        };
        let mut r = Report::default();
        r.check_smtp_limits("smtp.", &l);
        assert_eq!(
            r.errors,
            [
                "smtp.max_connections: must be at least 1",
                "smtp.command_timeout: must be more than zero",
                "smtp.send_timeout: must be more than zero",
            ]
        );
    }
}
