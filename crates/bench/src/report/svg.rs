//! Small inline SVG charts for the HTML report: no scripts, no external files, so
//! the page renders anywhere a browser can open a file.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 280.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;
const COLORS: [&str; 5] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];

/// Escapes text for SVG/HTML.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick step giving about five ticks up to `max`.
fn step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn frame(out: &mut String, title: &str, x_label: &str, y_label: &str, x_max: f64, y_max: f64) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"11\">\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        W / 2.0,
        escape(title)
    );
    let (x0, y0, x1, y1) = (LEFT, H - BOTTOM, W - RIGHT, TOP);
    let _ = write!(
        out,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#333\"/>"
    );
    let _ = write!(
        out,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"#333\"/>"
    );
    let ys = step(y_max);
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        let y = y0 - v / y_max * (y0 - y1);
        let _ = write!(
            out,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 4.0,
            y + 4.0,
            fmt_num(v)
        );
        v += ys;
    }
    let xs = step(x_max);
    let mut v = 0.0;
    while v <= x_max + 1e-9 {
        let x = x0 + v / x_max * (x1 - x0);
        let _ = write!(
            out,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            y0 + 14.0,
            fmt_num(v)
        );
        v += xs;
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>",
        (x0 + x1) / 2.0,
        H - 8.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
}

fn fmt_num(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A line chart of several series of `(x, y)` points.
pub(crate) fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(1.0, f64::max);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(1.0, f64::max)
        * 1.1;
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label, x_max, y_max);
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| {
                let px = LEFT + x / x_max * (W - RIGHT - LEFT);
                let py = H - BOTTOM - y / y_max * (H - BOTTOM - TOP);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>",
            path.join(" "),
            LEFT + 10.0,
            TOP + 14.0 * (i as f64 + 1.0),
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// A bar chart: one bar per labelled value.
pub(crate) fn bars(title: &str, x_label: &str, y_label: &str, values: &[(String, f64)]) -> String {
    let y_max = values.iter().map(|(_, v)| *v).fold(1.0, f64::max) * 1.1;
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label, 0.0f64.max(1.0), y_max);
    // The frame drew numeric x ticks for 0..1; cover them, bars carry labels.
    let _ = write!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"white\"/>",
        LEFT - 10.0,
        H - BOTTOM + 2.0,
        W - LEFT
    );
    let n = values.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    for (i, (label, v)) in values.iter().enumerate() {
        let h = v / y_max * (H - BOTTOM - TOP);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM - h,
            slot * 0.7,
            COLORS[0],
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            escape(label)
        );
    }
    out.push_str("</svg>");
    out
}

/// A line chart on fixed axes (x 0..`x_max`, y 0..`y_max`) with labelled
/// vertical markers (a limit, say): for series whose own range should not set
/// the scale, such as a CDF in percent.
pub(crate) fn lines_fixed(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    (x_max, y_max): (f64, f64),
    markers: &[(f64, &str)],
) -> String {
    let (x_max, y_max) = (x_max.max(f64::MIN_POSITIVE), y_max.max(f64::MIN_POSITIVE));
    let px = |x: f64| LEFT + x.clamp(0.0, x_max) / x_max * (W - RIGHT - LEFT);
    let py = |y: f64| H - BOTTOM - y.clamp(0.0, y_max) / y_max * (H - BOTTOM - TOP);
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label, x_max, y_max);
    for (x, label) in markers {
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{TOP}\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\
             <text x=\"{:.1}\" y=\"{}\" fill=\"#555\">{}</text>",
            H - BOTTOM,
            px(*x) + 3.0,
            TOP + 10.0,
            escape(label),
            x = px(*x),
        );
    }
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\" text-anchor=\"end\">{}</text>",
            path.join(" "),
            W - RIGHT - 6.0,
            H - BOTTOM - 10.0 - 14.0 * (series.len() - 1 - i) as f64,
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// A grouped bar chart: for each group (x axis, labels slanted), one bar per
/// series; `series[s].1[g]` is series `s`'s value in group `g`.
pub(crate) fn grouped_bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    // Taller than the other charts: the slanted group labels need the room.
    const GH: f64 = 360.0;
    const GBOTTOM: f64 = 105.0;
    let y_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0, f64::max)
        * 1.1;
    let (x0, y0, x1, y1) = (LEFT, GH - GBOTTOM, W - RIGHT, TOP);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {GH}\" width=\"{W}\" height=\"{GH}\" \
         font-family=\"sans-serif\" font-size=\"11\">\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#333\"/>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"#333\"/>\
         <text x=\"14\" y=\"{mid}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {mid})\">{}</text>",
        W / 2.0,
        escape(title),
        escape(y_label),
        mid = (y0 + y1) / 2.0,
    );
    let ys = step(y_max);
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        let y = y0 - v / y_max * (y0 - y1);
        let _ = write!(
            out,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 4.0,
            y + 4.0,
            fmt_num(v)
        );
        v += ys;
    }
    let slot = (x1 - x0) / groups.len().max(1) as f64;
    let bar = slot * 0.8 / series.len().max(1) as f64;
    for (g, label) in groups.iter().enumerate() {
        let left = x0 + slot * g as f64 + slot * 0.1;
        for (s, (_, values)) in series.iter().enumerate() {
            let v = values.get(g).copied().unwrap_or(0.0).max(0.0);
            let h = v / y_max * (y0 - y1);
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                left + bar * s as f64,
                y0 - h,
                bar,
                COLORS[s % COLORS.len()]
            );
        }
        let cx = x0 + slot * (g as f64 + 0.5);
        let _ = write!(
            out,
            "<text x=\"{cx:.1}\" y=\"{ly}\" text-anchor=\"end\" transform=\"rotate(-40 {cx:.1} {ly})\">{}</text>",
            escape(label),
            ly = y0 + 12.0,
        );
    }
    for (s, (name, _)) in series.iter().enumerate() {
        let _ = write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            W - RIGHT - 70.0,
            TOP + 14.0 * s as f64,
            W - RIGHT - 56.0,
            TOP + 14.0 * s as f64 + 9.0,
            escape(name),
            color = COLORS[s % COLORS.len()],
        );
    }
    out.push_str("</svg>");
    out
}

/// A bar chart of trials: one labelled bar per `(label, value, passed)`, green
/// when it passed and red when it failed.
pub(crate) fn pass_fail_bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    values: &[(String, f64, bool)],
) -> String {
    const PASS: &str = "#2ca02c";
    const FAIL: &str = "#d62728";
    let y_max = values.iter().map(|(_, v, _)| *v).fold(1.0, f64::max) * 1.1;
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label, 1.0, y_max);
    // As in `bars`: cover the frame's numeric x ticks, the bars carry labels.
    let _ = write!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"white\"/>",
        LEFT - 10.0,
        H - BOTTOM + 2.0,
        W - LEFT
    );
    let slot = (W - LEFT - RIGHT) / values.len().max(1) as f64;
    for (i, (label, v, passed)) in values.iter().enumerate() {
        let h = v.max(0.0) / y_max * (H - BOTTOM - TOP);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM - h,
            slot * 0.7,
            if *passed { PASS } else { FAIL },
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            escape(label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" fill=\"{PASS}\">passed</text>\
         <text x=\"{}\" y=\"{}\" fill=\"{FAIL}\">failed</text>",
        LEFT + 10.0,
        TOP + 12.0,
        LEFT + 60.0,
        TOP + 12.0
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_svg() {
        let l = lines(
            "t<1>",
            "s",
            "ops/s",
            &[("it 1".into(), vec![(0.0, 1.0), (1.0, 3.0)])],
        );
        assert!(l.starts_with("<svg") && l.ends_with("</svg>"));
        assert!(l.contains("t&lt;1&gt;") && l.contains("<polyline"));
        let b = bars(
            "b",
            "kbit/s",
            "connections",
            &[("0".into(), 2.0), ("20".into(), 5.0)],
        );
        assert_eq!(b.matches("<rect").count(), 3);
        assert_eq!(step(100.0), 20.0);
        let f = lines_fixed(
            "cdf",
            "s",
            "%",
            &[("80%".into(), vec![(0.0, 0.0), (30.0, 100.0)])],
            (120.0, 100.0),
            &[(60.0, "60 s")],
        );
        assert!(f.ends_with("</svg>") && f.contains("stroke-dasharray") && f.contains("60 s"));
        let g = grouped_bars(
            "t",
            "ms",
            &["a".into(), "b".into()],
            &[
                ("p50".into(), vec![1.0, 2.0]),
                ("p99".into(), vec![3.0, 4.0]),
            ],
        );
        assert_eq!(g.matches("<rect").count(), 4 + 2);
        let p = pass_fail_bars(
            "t",
            "trial",
            "mpm",
            &[("1".into(), 30.0, true), ("2".into(), 60.0, false)],
        );
        assert!(p.contains("#2ca02c") && p.contains("#d62728"));
        assert_eq!(step(7.0), 2.0);
    }
}
