//! Delivery status notifications (RFC 3464): the bounce a sender gets when some
//! recipients failed for good or expired in the queue.
//!
//! The bounce is a `multipart/report; report-type=delivery-status` message with
//! three parts: a human explanation, the `message/delivery-status` report (one
//! per-recipient block per failed recipient), and the header section of the
//! original message (`text/rfc822-headers`, so the bounce stays small). It is sent
//! from the null sender `<>`, so that it can never bounce in turn; messages from the
//! null sender get no bounce at all.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::headers::{header_section, rfc5322_date};
use crate::queue::{Envelope, Recipient};

/// Most bytes of the original header section quoted in a bounce.
const MAX_QUOTED_HEADERS: usize = 64 * 1024;

/// Builds the bounce for `failed` recipients of `envelope`'s message `original`.
pub fn build(
    hostname: &str,
    envelope: &Envelope,
    failed: &[&Recipient],
    original: &[u8],
) -> Vec<u8> {
    let boundary = format!("{}.{}/{hostname}", envelope.id, fastrand::u64(..));
    let now = rfc5322_date(SystemTime::now());
    let arrival = rfc5322_date(UNIX_EPOCH + std::time::Duration::from_secs(envelope.arrival));
    let mut m = String::with_capacity(4096);
    m.push_str(&format!(
        "From: Mail Delivery System <MAILER-DAEMON@{hostname}>\r\n\
         To: <{}>\r\n\
         Subject: Undelivered Mail Returned to Sender\r\n\
         Date: {now}\r\n\
         Message-ID: <{}.bounce.{}@{hostname}>\r\n\
         Auto-Submitted: auto-replied\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\
         \tboundary=\"{boundary}\"\r\n\
         \r\n\
         This is a MIME-encapsulated message.\r\n\r\n",
        clean(&envelope.sender),
        envelope.id,
        fastrand::u32(..),
    ));
    m.push_str(&format!(
        "--{boundary}\r\n\
         Content-Description: Notification\r\n\
         Content-Type: text/plain; charset=us-ascii\r\n\r\n\
         This is the mail system at host {hostname}.\r\n\r\n\
         I'm sorry to have to inform you that your message could not\r\n\
         be delivered to one or more recipients. It's attached below.\r\n\r\n"
    ));
    for r in failed {
        m.push_str(&format!(
            "<{}>: {}\r\n",
            clean(&r.address),
            clean(r.diagnostic.as_deref().unwrap_or("delivery failed"))
        ));
    }
    m.push_str(&format!(
        "\r\n--{boundary}\r\n\
         Content-Description: Delivery report\r\n\
         Content-Type: message/delivery-status\r\n\r\n\
         Reporting-MTA: dns; {hostname}\r\n\
         X-Stoa-Queue-ID: {}\r\n\
         Arrival-Date: {arrival}\r\n",
        envelope.id
    ));
    for r in failed {
        m.push_str(&per_recipient(r));
    }
    m.push_str(&format!(
        "\r\n--{boundary}\r\n\
         Content-Description: Undelivered Message Headers\r\n\
         Content-Type: text/rfc822-headers\r\n\r\n"
    ));
    let mut bytes = m.into_bytes();
    let headers = header_section(original);
    let headers = &headers[..headers.len().min(MAX_QUOTED_HEADERS)];
    bytes.extend_from_slice(headers);
    if !headers.ends_with(b"\r\n") {
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    bytes
}

/// One per-recipient block of the report (RFC 3464 §2.3).
fn per_recipient(r: &Recipient) -> String {
    let status = r.status.as_deref().unwrap_or("5.0.0");
    let mut block = format!("\r\nFinal-Recipient: rfc822; {}\r\n", clean(&r.address));
    if r.original != r.address {
        block.push_str(&format!(
            "Original-Recipient: rfc822; {}\r\n",
            clean(&r.original)
        ));
    }
    block.push_str(&format!("Action: failed\r\nStatus: {}\r\n", clean(status)));
    if let Some(diagnostic) = &r.diagnostic {
        let kind = if diagnostic.starts_with("host ") {
            "smtp"
        } else {
            "x-stoa"
        };
        block.push_str(&format!(
            "Diagnostic-Code: {kind}; {}\r\n",
            clean(diagnostic)
        ));
    }
    block
}

/// Printable ASCII only, so no text of a remote server can break the report's
/// structure.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::envelope::{RecipientState, Route, VERSION};

    #[test]
    fn report_structure() {
        let mut failed = Recipient::new(
            "x@remote.test".into(),
            "alias@local.test".into(),
            Route::Remote,
        );
        failed.state = RecipientState::Bounced;
        failed.status = Some("5.1.1".into());
        failed.diagnostic = Some("host h said: 550 5.1.1 no\r\nsuch user".into());
        let envelope = Envelope {
            version: VERSION,
            id: "Q1".into(),
            sender: "joe@local.test".into(),
            arrival: 0,
            attempts: 1,
            next_try: 0,
            client: "[127.0.0.1]".into(),
            recipients: vec![failed.clone()],
        };
        let bounce = build(
            "mx.test",
            &envelope,
            &[&failed],
            b"Subject: hi\r\nX: y\r\n\r\nsecret body\r\n",
        );
        let text = String::from_utf8(bounce).expect("ascii");
        assert!(text.contains("Content-Type: multipart/report; report-type=delivery-status;"));
        assert!(text.contains("To: <joe@local.test>\r\n"));
        assert!(text.contains("Final-Recipient: rfc822; x@remote.test\r\n"));
        assert!(text.contains("Original-Recipient: rfc822; alias@local.test\r\n"));
        assert!(text.contains(
            "Status: 5.1.1\r\nDiagnostic-Code: smtp; host h said: 550 5.1.1 no??such user\r\n"
        ));
        assert!(text.contains("Subject: hi\r\nX: y\r\n"));
        assert!(!text.contains("secret body"));
        assert!(text.ends_with("--\r\n"));
        // Every line ends in CRLF: no bare LF for the relay to trip on.
        assert_eq!(text.matches('\n').count(), text.matches("\r\n").count());
    }
}
