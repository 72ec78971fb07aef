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
        assert_eq!(step(7.0), 2.0);
    }
}
