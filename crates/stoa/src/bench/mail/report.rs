//! The mail run's reports (being written).
