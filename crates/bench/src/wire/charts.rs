//! PNG charts for `--report`, drawn with plotters: line charts (a figure by a label, one
//! line per series) and bar charts (one bar per named value). Text needs a TrueType font,
//! read at run time from the system's font directories (DejaVu Sans first); without one,
//! no chart is drawn and the report says so. Workloads describe charts; this file draws.

use anyhow::{anyhow, bail, Result};
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub enum Plot {
    Lines(Vec<Series>),
    Bars(Vec<(String, f64)>),
}

/// A chart a workload asks for.
#[derive(Debug, Clone)]
pub struct Chart {
    /// File name inside the report directory (`qps_by_n.png`).
    pub file: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub plot: Plot,
}

const FONT_DIRS: [&str; 3] = [
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "/usr/lib/fonts",
];
const FAMILY: &str = "sans-serif";

/// Registers a system TrueType font with plotters once; false when none was found.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let Some(path) = find_font() else {
            return false;
        };
        let Ok(bytes) = std::fs::read(&path) else {
            return false;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok()
    })
}

/// DejaVuSans.ttf if present, else the first `.ttf` under the font directories.
fn find_font() -> Option<PathBuf> {
    let mut all = Vec::new();
    for d in FONT_DIRS {
        collect_ttf(Path::new(d), &mut all, 0);
    }
    all.iter()
        .find(|p| p.file_name().is_some_and(|n| n == "DejaVuSans.ttf"))
        .or_else(|| all.first())
        .cloned()
}

fn collect_ttf(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 || out.len() > 1000 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_ttf(&p, out, depth + 1);
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// Draws `chart` into `dir/chart.file`.
pub fn render(dir: &Path, chart: &Chart) -> Result<()> {
    if !font_ready() {
        bail!("no TrueType font found under {FONT_DIRS:?}");
    }
    let path = dir.join(&chart.file);
    let root = BitMapBackend::new(&path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    match &chart.plot {
        Plot::Lines(series) => lines(&root, chart, series)?,
        Plot::Bars(bars) => bar_chart(&root, chart, bars)?,
    }
    root.present().map_err(err)?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn lines(root: &Area<'_>, chart: &Chart, series: &[Series]) -> Result<()> {
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let x_min = pts().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = pts().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_max = pts().map(|p| p.1).fold(0.0, f64::max);
    if !x_min.is_finite() {
        bail!("chart {} has no points", chart.file);
    }
    let x_max = if x_max > x_min { x_max } else { x_min + 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(x_min..x_max, 0f64..y_max)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style((FAMILY, 14))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        c.draw_series(
            s.points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )
        .map_err(err)?;
    }
    c.configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

fn bar_chart(root: &Area<'_>, chart: &Chart, bars: &[(String, f64)]) -> Result<()> {
    if bars.is_empty() {
        bail!("chart {} has no bars", chart.file);
    }
    let y_max = bars.iter().map(|b| b.1).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let n = bars.len();
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
        .map_err(err)?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style((FAMILY, 14))
        .draw()
        .map_err(err)?;
    c.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
        let color = Palette99::pick(i).to_rgba();
        Rectangle::new(
            [(i as f64 - 0.35, 0.0), (i as f64 + 0.35, *v)],
            color.filled(),
        )
    }))
    .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_line_and_bar_charts_when_a_font_exists() {
        let d = tempfile::tempdir().expect("tempdir");
        let line = Chart {
            file: "l.png".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            plot: Plot::Lines(vec![Series {
                name: "a".into(),
                points: vec![(1.0, 2.0), (2.0, 3.0)],
            }]),
        };
        if !font_ready() {
            assert!(render(d.path(), &line).is_err(), "drawn without a font");
            assert!(!d.path().join("l.png").exists());
            return;
        }
        render(d.path(), &line).expect("line chart");
        let bars = Chart {
            file: "b.png".into(),
            plot: Plot::Bars(vec![("raw".into(), 3.0), ("stored".into(), 1.0)]),
            ..line
        };
        render(d.path(), &bars).expect("bar chart");
        assert!(d.path().join("l.png").exists());
        assert!(d.path().join("b.png").exists());
    }
}
