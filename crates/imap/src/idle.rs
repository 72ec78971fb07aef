//! IDLE (RFC 2177): the session waits for DONE and pushes every change to its
//! selected folder as it happens: changes made through this server wake it at
//! once (the store's observer), changes by other processes are seen at the next
//! periodic check. IDLE is bounded by `idle_command_timeout`, after which the
//! session ends with `* BYE` (clients re-issue IDLE every 29 minutes).
//!
//! While it waits, the session's folder is released (its directory and log
//! closed): ten thousand sessions in IDLE hold ten thousand descriptors, not
//! thirty. Each wake reopens it for the refresh and releases it again; a folder
//! deleted meanwhile stays released, and the session goes on with what it knew, as
//! after any failed refresh (the error is logged; commands that need the files
//! answer `NO [NONEXISTENT]`).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use stoa_imap_proto::command::{Line, idle_done};
use stoa_imap_proto::response::{self, Code, Condition};
use stoa_netkit::line::ReadEnd;

use crate::conn::{Conn, Flow};

impl Conn {
    pub(crate) async fn idle(&mut self, tag: &str) -> io::Result<Flow> {
        let Some(changed) = self.user.as_ref().map(|u| Arc::clone(&u.watch.changed)) else {
            response::write_tagged(
                self.io.out(),
                tag,
                Condition::Bad,
                None,
                "Not authenticated",
            );
            return Ok(Flow::Continue);
        };
        let limits = self.shared.config.limits.clone();
        let end = Instant::now() + limits.idle_command_timeout;
        Box::pin(self.updates(true, &[])).await?;
        response::write_continuation(self.io.out(), "idling");
        loop {
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            Box::pin(self.updates(true, &[])).await?;
            self.flush().await?;
            let max = self.reader.limits().max_line;
            if let Line::Complete { result, consumed } = idle_done(self.io.unread(), max) {
                self.io.consume(consumed);
                match result {
                    Ok(()) => {
                        response::write_tagged(
                            self.io.out(),
                            tag,
                            Condition::Ok,
                            None,
                            "IDLE terminated",
                        );
                    }
                    Err(e) => {
                        response::write_tagged(self.io.out(), tag, Condition::Bad, None, e.text());
                    }
                }
                return Ok(Flow::Continue);
            }
            // While it waits, the session holds its socket only: the folder's
            // directory and log go back, and the refresh at the wake (`updates`)
            // takes them again; DONE finds the folder open for the next command.
            if let Some(mut selected) = self.selected.take() {
                selected.folder = selected.folder.release();
                self.selected = Some(selected);
            }
            let check = tokio::time::sleep(limits.idle_check);
            tokio::select! {
                read = self.io.read_parked(end, Some(&mut self.shutdown)) => match read? {
                    ReadEnd::Data => {}
                    ReadEnd::Eof => return Ok(Flow::Close),
                    ReadEnd::Timeout => {
                        response::write_bye(self.io.out(), None, "IDLE for too long; reconnect");
                        return Ok(Flow::Close);
                    }
                    ReadEnd::Draining => {
                        response::write_bye(self.io.out(), Some(&Code::Unavailable), "Server shutting down");
                        return Ok(Flow::Close);
                    }
                },
                () = &mut notified => {}
                () = check => {}
            }
        }
    }
}
