//! The sessions the kit's client dropped on purpose (`mail2001.md` §2.8).
//!
//! The white paper never mentions them, but the published Sun page counts them:
//! "SMTP Disconnect" and "POP Disconnect" are not errors (its Error Rate leaves
//! them out of the numerator, see `stoa_mailgen::qos::error_percent`), and its
//! other rows show where in a session they happen *(inferred)*:
//!
//! - **SMTP**: "SMTP Data Response Time" passes are exactly SMTP Data attempts
//!   minus SMTP Disconnects at every level (684,907 − 6,782 = 678,125 at 80 %;
//!   855,208 − 8,414; 1,027,698 − 10,499), and SMTP Quit attempts fall short of
//!   SMTP Data attempts by the same number, give or take three: the client
//!   drops the connection during
//!   the message transfer, after DATA's `354`, and that transfer counts as
//!   attempted and not passed. Share of SMTP sessions: [`SMTP_DISCONNECT_SHARE`].
//! - **POP**: POP Retrieve attempts minus POP Delete attempts equal the POP
//!   Disconnects (1,982 for 1,989; 2,374 for 2,375; 2,814 for 2,816): each drop
//!   falls between a `RETR` and its `DELE`, so the dropped session deletes
//!   nothing. About half of them ([`POP_DISCONNECT_MID_BODY_SHARE`]) also cost a
//!   "POP Retrieve Response Time" pass (1,038 of 1,989; 1,248 of 2,375; 1,475 of
//!   2,816): those break off during the body, the rest after it. The rate per
//!   `RETR` is [`POP_DISCONNECT_PER_RETRIEVE`], about 0.27 % of POP sessions
//!   at one message per session.
//!
//! The ratios are pooled over the page's three levels, which agree to within a
//! few percent of each other. How the kit chose the sessions is not known; here
//! every session and every `RETR` draws independently.

use fastrand::Rng;

/// Share of SMTP sessions the client drops during the message transfer: the
/// Sun page's SMTP Disconnect / (SMTP Session + SMTP Disconnect), pooled over
/// its three levels: 25,695 / 2,567,810 = 1.0007 % (0.990 %, 0.984 %, 1.022 %
/// per level).
pub const SMTP_DISCONNECT_SHARE: f64 = 0.0100;

/// Chance that a `RETR` is where the client drops its POP session: the Sun
/// page's POP Disconnect / POP Retrieve attempts, pooled: 7,180 / 2,654,547 =
/// 0.2705 % (0.276 %, 0.264 %, 0.272 % per level).
pub const POP_DISCONNECT_PER_RETRIEVE: f64 = 0.0027;

/// Share of POP drops that break off during the message body (the rest come
/// after the body, before `DELE`): the Sun page's failed "POP Retrieve Response
/// Time" checks / POP Disconnects, pooled: 3,761 / 7,180 = 52.4 %.
pub const POP_DISCONNECT_MID_BODY_SHARE: f64 = 0.52;

/// Whether an SMTP session is one the client drops during its transfer.
pub fn smtp_drops(rng: &mut Rng) -> bool {
    rng.f64() < SMTP_DISCONNECT_SHARE
}

/// Where a POP session is dropped, if it gets that far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PopDrop {
    /// The `RETR` (1-based, in session order) at which the client drops; a
    /// session with fewer messages is not dropped.
    pub retrieve: u32,
    /// During the body (the transfer is not completed), else after the body,
    /// before its `DELE`.
    pub mid_body: bool,
}

/// Draws a POP session's drop point: each `RETR` is the drop point with
/// [`POP_DISCONNECT_PER_RETRIEVE`], so the first one is geometric.
pub fn pop_drop(rng: &mut Rng) -> PopDrop {
    // Inverse transform of the geometric distribution: the number of RETRs up
    // to and including the first "drop" draw.
    let u = 1.0 - rng.f64(); // in (0, 1], so ln is finite
    let k = (u.ln() / (1.0 - POP_DISCONNECT_PER_RETRIEVE).ln()).floor() + 1.0;
    PopDrop {
        retrieve: if k >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            k as u32
        },
        mid_body: rng.f64() < POP_DISCONNECT_MID_BODY_SHARE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Sun page's counters per level: SMTP Session, SMTP Disconnect, POP
    /// Retrieve attempts, POP Retrieve Response Time passes, POP Disconnect.
    const SUN: [(u64, u64, u64, u64, u64); 3] = [
        (678_122, 6_782, 719_642, 718_604, 1_989),
        (846_795, 8_414, 900_150, 898_902, 2_375),
        (1_017_198, 10_499, 1_034_755, 1_033_280, 2_816),
    ];

    #[test]
    fn constants_follow_the_published_counters() {
        let sum = |f: fn(&(u64, u64, u64, u64, u64)) -> u64| SUN.iter().map(f).sum::<u64>() as f64;
        let smtp = sum(|l| l.1) / (sum(|l| l.0) + sum(|l| l.1));
        assert!((smtp - SMTP_DISCONNECT_SHARE).abs() < 0.00005, "{smtp}");
        let per_retr = sum(|l| l.4) / sum(|l| l.2);
        assert!(
            (per_retr - POP_DISCONNECT_PER_RETRIEVE).abs() < 0.00005,
            "{per_retr}"
        );
        let mid = sum(|l| l.2 - l.3) / sum(|l| l.4);
        assert!((mid - POP_DISCONNECT_MID_BODY_SHARE).abs() < 0.005, "{mid}");
    }

    #[test]
    fn draws_have_the_shares() {
        let mut rng = Rng::with_seed(18);
        let n = 400_000;
        let smtp = (0..n).filter(|_| smtp_drops(&mut rng)).count() as f64 / f64::from(n);
        assert!((smtp - SMTP_DISCONNECT_SHARE).abs() < 0.0008, "{smtp}");
        // A session of one message is dropped with the per-RETR chance; the
        // drop point is never 0.
        let drops: Vec<PopDrop> = (0..n).map(|_| pop_drop(&mut rng)).collect();
        assert!(drops.iter().all(|d| d.retrieve >= 1));
        let first = drops.iter().filter(|d| d.retrieve == 1).count() as f64 / f64::from(n);
        assert!(
            (first - POP_DISCONNECT_PER_RETRIEVE).abs() < 0.0004,
            "{first}"
        );
        let within3 = drops.iter().filter(|d| d.retrieve <= 3).count() as f64 / f64::from(n);
        let expect = 1.0 - (1.0 - POP_DISCONNECT_PER_RETRIEVE).powi(3);
        assert!((within3 - expect).abs() < 0.0006, "{within3}");
        let mid = drops.iter().filter(|d| d.mid_body).count() as f64 / f64::from(n);
        assert!((mid - POP_DISCONNECT_MID_BODY_SHARE).abs() < 0.005, "{mid}");
    }
}
