//! RETR and TOP: the stored message streamed through the codec's byte-stuffing
//! [`stoa_pop3_proto::MessageEncoder`], [`CHUNK`] bytes at a time.
//!
//! The file is opened and read on blocking threads (the store is synchronous); the
//! encoded bytes go out after each chunk, within the send timeout, so a message
//! never sits whole in memory and a slow reader holds at most one chunk (about
//! twice that encoded). If the message cannot be opened the client gets
//! `-ERR [SYS/TEMP] Message cannot be read` and the session goes on; once the status
//! line has gone out, a read error can only close the connection. The store checks
//! the file's size against the listing at open, and every read is checked against
//! it too, so the bytes sent are exactly the size LIST announced.

use std::fs::File;
use std::io::{self, Read};

use stoa_netkit::line::Flow;
use stoa_pop3_proto::{Response, Retrieval};

use crate::conn::Conn;

/// Bytes of the stored message read at a time.
pub(crate) const CHUNK: usize = 64 * 1024;

impl Conn {
    /// Sends message `retrieval.index` (or its top) to the client.
    pub(crate) async fn retrieve(&mut self, retrieval: Retrieval) -> io::Result<Flow> {
        let Some(mailbox) = self.mailbox.clone() else {
            // The codec only retrieves after a login, which sets the mailbox.
            Response::message_unavailable().write_to(self.io.out());
            return Ok(Flow::Continue);
        };
        let (index, mut left) = (retrieval.index, retrieval.size);
        let opened = tokio::task::spawn_blocking(move || {
            let file = mailbox.open(index)?;
            Ok::<_, stoa_mailstore::StoreError>(file)
        })
        .await;
        let mut file = match opened {
            Ok(Ok(file)) => file,
            Ok(Err(e)) => return Ok(self.unavailable(retrieval, &e)),
            Err(e) => return Ok(self.unavailable(retrieval, &e)),
        };
        crate::metrics::count_retrieval();
        retrieval.response().write_to(self.io.out());
        let mut encoder = retrieval.encoder();
        let mut chunk = Vec::with_capacity(CHUNK);
        while left > 0 {
            (file, chunk) = read_chunk(file, chunk, left).await?;
            left -= chunk.len() as u64;
            if !encoder.encode(&chunk, self.io.out()) {
                break; // TOP has all it needs
            }
            if left > 0 {
                self.flush().await?;
            }
        }
        encoder.finish(self.io.out());
        Ok(Flow::Continue)
    }

    /// `-ERR [SYS/TEMP] Message cannot be read`, logged.
    fn unavailable(&mut self, retrieval: Retrieval, error: &dyn std::fmt::Display) -> Flow {
        tracing::error!(
            "{}: cannot open message {}: {error}",
            self.peer,
            retrieval.number()
        );
        Response::message_unavailable().write_to(self.io.out());
        Flow::Continue
    }
}

/// Reads the next `min(CHUNK, left)` bytes of `file` into `chunk` (emptied first)
/// on a blocking thread; a file shorter than that is an error.
async fn read_chunk(file: File, mut chunk: Vec<u8>, left: u64) -> io::Result<(File, Vec<u8>)> {
    let want = left.min(CHUNK as u64);
    tokio::task::spawn_blocking(move || {
        chunk.clear();
        let read = (&file).take(want).read_to_end(&mut chunk)?;
        if (read as u64) < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "message shorter than its listed size",
            ));
        }
        Ok((file, chunk))
    })
    .await
    .map_err(io::Error::other)?
}
