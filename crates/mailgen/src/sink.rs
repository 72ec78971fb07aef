//! (being written) The SMTP sink.

/// The sink's totals.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct SinkStats {
    /// Connections served.
    pub sessions: u64,
    /// Messages accepted.
    pub messages: u64,
    /// Recipients of those messages.
    pub recipients: u64,
    /// Bytes of those messages.
    pub bytes: u64,
    /// Protocol violations.
    pub errors: u64,
}
