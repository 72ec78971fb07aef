//! Helpers shared by the client tests: tags, messages and one-connection fake
//! servers on port 0.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;

use stoa_mailgen::message::{Message, Tag};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A measured, non-probe tag with sequence number `seq`.
pub fn tag(seq: u64) -> Tag {
    Tag {
        run: 0xabcd_0123,
        level: 1,
        measured: true,
        seq,
        probe: false,
    }
}

/// A message of `size` bytes tagged with `tag`.
pub fn message(tag: &Tag, size: usize) -> Message {
    Message::new("sender@remote.test", "user1@stoa.test", tag, size)
}

/// The message's bytes.
pub fn bytes(m: &Message) -> Vec<u8> {
    let mut v = m.head.clone();
    v.extend_from_slice(m.body);
    v
}

/// Serves one connection with `script`; returns the address.
pub async fn serve_once<F, Fut>(script: F) -> SocketAddr
where
    F: FnOnce(Script) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            script(Script::new(stream)).await;
        }
    });
    addr
}

/// An address nothing listens on.
pub async fn refused_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr")
}

/// The server side of a scripted conversation.
pub struct Script {
    pub reader: BufReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
}

impl Script {
    fn new(stream: TcpStream) -> Script {
        let (rd, writer) = stream.into_split();
        Script {
            reader: BufReader::new(rd),
            writer,
        }
    }

    /// Writes `text` as is.
    pub async fn send(&mut self, text: &str) {
        let _ = self.writer.write_all(text.as_bytes()).await;
    }

    /// Reads a line without CRLF; `None` at EOF.
    pub async fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line).await {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
        }
    }

    /// Reads a line and replies `reply` (CRLF added).
    pub async fn answer(&mut self, reply: &str) -> Option<String> {
        let line = self.line().await?;
        self.send(&format!("{reply}\r\n")).await;
        Some(line)
    }

    /// Reads lines up to and including the terminating dot.
    pub async fn read_to_dot(&mut self) {
        while let Some(line) = self.line().await {
            if line == "." {
                return;
            }
        }
    }
}
