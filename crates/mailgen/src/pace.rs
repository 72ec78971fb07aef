//! Modem pacing (`mail2001.md` §1.9) and the buffered wire I/O the clients and
//! the sink share.
//!
//! A [`Pace`] is either full speed or a byte rate (the modem's 6,000 B/s). Paced
//! traffic moves in chunks of at most [`CHUNK`] bytes on a schedule fixed when
//! the transfer begins: the chunk that follows `n` bytes may start no earlier
//! than `start + n / rate` ([`Pace::offset`]). Waiting for absolute instants
//! with `tokio::time::sleep_until` keeps the cumulative rate exact however late
//! the timer fires, with no drift.
//!
//! The crate-internal reader (`Reader`) reads a connection through a bounded
//! buffer, paced the same way, and yields lines or line pieces, or lends its
//! buffer to a parser (the SMTP client's replies); every read has a timeout. `read_dot_body` streams a dot-terminated body (SMTP `DATA`,
//! POP3 `RETR`/`TOP`) without holding it in memory.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, sleep_until, timeout};

/// The largest piece a paced transfer moves at once: one Ethernet TCP segment's
/// payload, so pacing looks like a slow link rather than bursts.
pub const CHUNK: usize = 1_460;

/// How much a full-speed write hands the socket at once; each piece gets its own
/// timeout, so a large message that keeps moving never times out.
const FULL_SPEED_CHUNK: usize = 64 * 1024;

/// The speed of one simulated client: full speed or a fixed byte rate, both
/// directions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Bytes per second; `None` is full speed.
    rate: Option<f64>,
}

impl Pace {
    /// The modem of `mail2001.md` §1.9: 56.6 kbaud, taken as about 6,000 B/s.
    pub const MODEM_BYTES_PER_SEC: f64 = 6_000.0;

    /// Modem speed: 6,000 B/s both directions.
    pub fn modem() -> Pace {
        Pace {
            rate: Some(Pace::MODEM_BYTES_PER_SEC),
        }
    }

    /// No pacing.
    pub fn full() -> Pace {
        Pace { rate: None }
    }

    /// The rate in bytes per second; `None` at full speed.
    pub fn bytes_per_sec(&self) -> Option<f64> {
        self.rate
    }

    /// When, after a transfer began, the byte following `bytes_before` bytes may
    /// move: `bytes_before / rate`; zero at full speed. The whole schedule.
    pub fn offset(&self, bytes_before: u64) -> Duration {
        match self.rate {
            Some(rate) if rate > 0.0 => Duration::from_secs_f64(bytes_before as f64 / rate),
            _ => Duration::ZERO,
        }
    }

    /// The largest piece moved at once: [`CHUNK`] when paced.
    fn chunk(&self) -> usize {
        if self.rate.is_some() {
            CHUNK
        } else {
            FULL_SPEED_CHUNK
        }
    }
}

/// The schedule of one transfer: when it began and how many bytes have moved.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    pace: Pace,
    start: Instant,
    moved: u64,
}

impl Pacer {
    /// A transfer beginning now.
    pub fn new(pace: Pace) -> Pacer {
        Pacer {
            pace,
            start: Instant::now(),
            moved: 0,
        }
    }

    /// Bytes moved so far.
    pub fn moved(&self) -> u64 {
        self.moved
    }

    /// The earliest instant the next chunk may move.
    pub fn next_at(&self) -> Instant {
        self.start + self.pace.offset(self.moved)
    }

    /// Waits until the next chunk may move (returns at once at full speed or when
    /// behind schedule).
    pub async fn wait(&self) {
        if self.pace.rate.is_some() {
            sleep_until(self.next_at()).await;
        }
    }

    /// Counts `n` bytes as moved.
    pub fn advance(&mut self, n: usize) {
        self.moved += n as u64;
    }
}

/// Writes all of `buf` on `pacer`'s schedule, in chunks of at most [`CHUNK`]
/// bytes when paced. Each chunk must be taken by the socket within `limit`, else
/// the error is [`io::ErrorKind::TimedOut`].
pub async fn write_paced<W>(
    w: &mut W,
    pacer: &mut Pacer,
    buf: &[u8],
    limit: Duration,
) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    for chunk in buf.chunks(pacer.pace.chunk()) {
        pacer.wait().await;
        match timeout(limit, w.write_all(chunk)).await {
            Ok(result) => result?,
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
        pacer.advance(chunk.len());
    }
    Ok(())
}

// === Crate-internal wire reading ===

/// Why a read ended without data.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection (possibly in the middle of a line).
    Eof,
    /// No bytes within the read timeout.
    Timeout,
    /// A line longer than the caller's limit.
    TooLong,
    /// The connection failed (reset…).
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Eof => f.write_str("connection closed"),
            ReadError::Timeout => f.write_str("no reply within the timeout"),
            ReadError::TooLong => f.write_str("line too long"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// A bounded, optionally paced, buffered reader of a connection.
pub(crate) struct Reader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// The longest wait for any one read.
    limit: Duration,
    pacer: Pacer,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// Reads `inner` through a buffer of `capacity` bytes (the longest piece
    /// [`Reader::piece`] returns) at `pace`, waiting at most `limit` per read.
    pub(crate) fn new(inner: R, capacity: usize, pace: Pace, limit: Duration) -> Reader<R> {
        Reader {
            inner,
            buf: vec![0; capacity.max(16)].into_boxed_slice(),
            pos: 0,
            end: 0,
            limit,
            pacer: Pacer::new(pace),
        }
    }

    /// Starts a new read schedule (a request was just sent).
    pub(crate) fn begin_transfer(&mut self) {
        self.pacer = Pacer::new(self.pacer.pace);
    }

    /// Whether a whole line is already buffered (so reading it will not wait).
    pub(crate) fn has_line(&self) -> bool {
        memchr::memchr(b'\n', &self.buf[self.pos..self.end]).is_some()
    }

    /// The next piece of input: a whole line including its `\n` (`true`), or, for
    /// a line longer than the buffer, the buffer's worth of it (`false`).
    pub(crate) async fn piece(&mut self) -> Result<(&[u8], bool), ReadError> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos..self.end]) {
                let start = self.pos;
                self.pos += i + 1;
                return Ok((&self.buf[start..self.pos], true));
            }
            if self.end - self.pos == self.buf.len() {
                let start = self.pos;
                self.pos = self.end;
                return Ok((&self.buf[start..self.end], false));
            }
            self.fill().await?;
        }
    }

    /// The bytes buffered and not taken yet, for a parser that reads them in place
    /// ([`Reader::consume`] takes what it used, [`Reader::read_more`] adds more).
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Takes the first `n` buffered bytes (at most all of them).
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos = self.pos.saturating_add(n).min(self.end);
    }

    /// Reads more bytes after those buffered (on schedule, when paced);
    /// [`ReadError::TooLong`] when the buffer is full of bytes not taken yet.
    pub(crate) async fn read_more(&mut self) -> Result<(), ReadError> {
        if self.end - self.pos == self.buf.len() {
            return Err(ReadError::TooLong);
        }
        self.fill().await
    }

    /// The next line of at most `max` bytes, without its line ending.
    pub(crate) async fn line(&mut self, max: usize) -> Result<&[u8], ReadError> {
        let (line, whole) = self.piece().await?;
        if !whole || line.len() > max {
            return Err(ReadError::TooLong);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        Ok(line.strip_suffix(b"\r").unwrap_or(line))
    }

    /// Reads more bytes into the buffer (at most [`CHUNK`], on schedule, when
    /// paced).
    async fn fill(&mut self) -> Result<(), ReadError> {
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        let room = (self.buf.len() - self.end).min(self.pacer.pace.chunk());
        self.pacer.wait().await;
        let read = self.inner.read(&mut self.buf[self.end..self.end + room]);
        let n = match timeout(self.limit, read).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Io(e)),
            Ok(Ok(0)) => return Err(ReadError::Eof),
            Ok(Ok(n)) => n,
        };
        self.end += n;
        self.pacer.advance(n);
        Ok(())
    }
}

/// Reads a dot-terminated body up to and including the terminating `.` line,
/// un-dot-stuffing it and handing the message octets to `on_data` piece by
/// piece; `count` is the octets seen so far (left in place when a read fails).
pub(crate) async fn read_dot_body<R, F>(
    reader: &mut Reader<R>,
    count: &mut u64,
    mut on_data: F,
) -> Result<(), ReadError>
where
    R: AsyncRead + Unpin,
    F: FnMut(&[u8]),
{
    let mut line_start = true;
    loop {
        let (mut piece, whole) = reader.piece().await?;
        if line_start && piece.first() == Some(&b'.') {
            if piece == b".\r\n" || piece == b".\n" {
                return Ok(());
            }
            piece = &piece[1..];
        }
        *count += piece.len() as u64;
        on_data(piece);
        line_start = whole;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modem_schedule() {
        let modem = Pace::modem();
        assert_eq!(modem.bytes_per_sec(), Some(6_000.0));
        assert_eq!(modem.offset(0), Duration::ZERO);
        assert_eq!(modem.offset(6_000), Duration::from_secs(1));
        assert_eq!(modem.offset(12_000), Duration::from_secs(2));
        let one = modem.offset(CHUNK as u64).as_secs_f64();
        assert!((one - 1_460.0 / 6_000.0).abs() < 1e-9);
        // No drift: the offset of chunk k depends only on the bytes before it.
        let k = 57u64;
        let sum: f64 = (0..k)
            .map(|i| {
                (modem.offset((i + 1) * CHUNK as u64) - modem.offset(i * CHUNK as u64))
                    .as_secs_f64()
            })
            .sum();
        assert!((sum - modem.offset(k * CHUNK as u64).as_secs_f64()).abs() < 1e-6);
    }

    #[test]
    fn full_speed_never_waits() {
        let full = Pace::full();
        assert_eq!(full.bytes_per_sec(), None);
        assert_eq!(full.offset(1 << 40), Duration::ZERO);
        let pacer = Pacer::new(full);
        assert!(pacer.next_at() <= Instant::now());
    }

    #[tokio::test]
    async fn reader_pieces_and_dot_body() {
        let wire: &[u8] = b"+OK hi\r\nline one\r\n..dotted\r\n.\r\nnext\r\n";
        let mut r = Reader::new(wire, 16, Pace::full(), Duration::from_secs(5));
        assert_eq!(r.line(100).await.ok(), Some(&b"+OK hi"[..]));
        let mut count = 0;
        let mut got = Vec::new();
        let res = read_dot_body(&mut r, &mut count, |d| got.extend_from_slice(d)).await;
        assert!(res.is_ok());
        assert_eq!(got, b"line one\r\n.dotted\r\n");
        assert_eq!(count, got.len() as u64);
        assert_eq!(r.line(100).await.ok(), Some(&b"next"[..]));
        assert!(matches!(r.line(100).await, Err(ReadError::Eof)));
    }

    #[tokio::test]
    async fn long_lines_come_in_pieces() {
        let mut wire = vec![b'.'];
        wire.extend(std::iter::repeat_n(b'x', 40));
        wire.extend_from_slice(b"\r\n.\r\n");
        let mut r = Reader::new(&wire[..], 16, Pace::full(), Duration::from_secs(5));
        let mut count = 0;
        let res = read_dot_body(&mut r, &mut count, |_| {}).await;
        assert!(res.is_ok());
        assert_eq!(count, 42);
        let mut r = Reader::new(&wire[..], 16, Pace::full(), Duration::from_secs(5));
        assert!(matches!(r.line(100).await, Err(ReadError::TooLong)));
    }

    #[tokio::test]
    async fn a_parser_reads_the_buffer_in_place() {
        let wire: &[u8] = b"250-a\r\n250 b\r\n221 bye\r\n";
        let mut r = Reader::new(wire, 16, Pace::full(), Duration::from_secs(5));
        assert!(r.buffered().is_empty());
        while r.buffered().len() < 14 {
            assert!(r.read_more().await.is_ok());
        }
        assert!(r.buffered().starts_with(b"250-a\r\n250 b\r\n"));
        r.consume(14);
        assert_eq!(r.line(100).await.ok(), Some(&b"221 bye"[..]));
        assert!(matches!(r.read_more().await, Err(ReadError::Eof)));
        // A buffer full of bytes not taken cannot take more.
        let mut r = Reader::new(&[b'x'; 40][..], 16, Pace::full(), Duration::from_secs(5));
        while r.buffered().len() < 16 {
            assert!(r.read_more().await.is_ok());
        }
        assert!(matches!(r.read_more().await, Err(ReadError::TooLong)));
        r.consume(usize::MAX);
        assert!(r.buffered().is_empty());
        assert!(r.read_more().await.is_ok());
    }
}
