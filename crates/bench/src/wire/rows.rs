//! The figures a wire workload produces, in one shape for every workload: a `Row` is one
//! measured point (its `phase`, the labels that identify it, such as `n` or `clients`, and
//! named numeric figures), a `Figures` list is a summary. Because every figure is named and
//! every point is identified by its labels, a shale run and a peer run of the same workload
//! can be matched point by point and divided figure by figure (`ratio_rows`,
//! `ratio_figures`) without knowing the workload. This file never measures anything.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// Named numeric figures, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct Figures(pub Vec<(String, f64)>);

impl Figures {
    pub fn set(&mut self, name: &str, v: f64) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = v,
            None => self.0.push((name.to_owned(), v)),
        }
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }

    /// A JSON object; non-finite numbers (a ratio with a zero divisor) become null.
    pub fn to_json(&self) -> Map<String, Value> {
        self.0
            .iter()
            .map(|(k, v)| (k.clone(), number(*v)))
            .collect()
    }
}

/// One measured point of one target.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// "shale", "peer" or "shale/peer" (ratios).
    pub target: String,
    pub phase: String,
    pub labels: Vec<(String, Value)>,
    pub figures: Figures,
}

impl Row {
    pub fn new(phase: &str) -> Row {
        Row {
            phase: phase.to_owned(),
            ..Row::default()
        }
    }

    pub fn label(mut self, name: &str, v: impl Into<Value>) -> Row {
        self.labels.push((name.to_owned(), v.into()));
        self
    }

    pub fn fig(mut self, name: &str, v: f64) -> Row {
        self.figures.set(name, v);
        self
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.figures.get(name)
    }

    pub fn label_value(&self, name: &str) -> Option<&Value> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// What identifies the point across targets: the phase and the labels.
    fn key(&self) -> (String, String) {
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        (self.phase.clone(), labels.join(","))
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2 + self.labels.len() + self.figures.0.len()))?;
        m.serialize_entry("target", &self.target)?;
        m.serialize_entry("phase", &self.phase)?;
        for (k, v) in &self.labels {
            m.serialize_entry(k, v)?;
        }
        for (k, v) in &self.figures.0 {
            m.serialize_entry(k, &number(*v))?;
        }
        m.end()
    }
}

fn number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// `a / b`, NaN when `b` is zero (shown as "-" and written as null).
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::NAN
    } else {
        a / b
    }
}

/// `rows` grouped by phase, the phases in the order they first appear.
pub fn by_phase(rows: &[Row]) -> Vec<(&str, Vec<&Row>)> {
    let mut out: Vec<(&str, Vec<&Row>)> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|(p, _)| *p == r.phase) {
            Some((_, of)) => of.push(r),
            None => out.push((&r.phase, vec![r])),
        }
    }
    out
}

/// Phases ending so are time series (`load-interval`): their points fall at different
/// moments for each target, so they are not divided point by point.
const SERIES_SUFFIX: &str = "-interval";

/// For every row of `shale` with a row of the same phase and labels in `peer`, a row with
/// target "shale/peer" holding shale's figure divided by the peer's, for every figure both
/// have. Time-series phases are left out.
pub fn ratio_rows(shale: &[Row], peer: &[Row]) -> Vec<Row> {
    shale
        .iter()
        .filter(|s| !s.phase.ends_with(SERIES_SUFFIX))
        .filter_map(|s| {
            let key = s.key();
            let p = peer.iter().find(|p| p.key() == key)?;
            let mut r = Row {
                target: "shale/peer".to_owned(),
                phase: s.phase.clone(),
                labels: s.labels.clone(),
                figures: ratio_figures(&s.figures, &p.figures),
            };
            r.figures.0.retain(|(_, v)| !v.is_nan());
            Some(r)
        })
        .collect()
}

/// Figure-by-figure quotients of the figures both lists have.
pub fn ratio_figures(a: &Figures, b: &Figures) -> Figures {
    Figures(
        a.0.iter()
            .filter_map(|(k, v)| Some((k.clone(), ratio(*v, b.get(k)?))))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_flat_with_null_for_nan() {
        let mut r = Row::new("lookup").label("clients", 8).fig("qps", 10.0);
        r.target = "shale".into();
        r.figures.set("ratio", f64::NAN);
        let v = serde_json::to_value(&r).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"target": "shale", "phase": "lookup", "clients": 8,
                               "qps": 10.0, "ratio": null})
        );
    }

    #[test]
    fn ratios_match_rows_by_phase_and_labels() {
        let s = vec![
            Row::new("q")
                .label("n", 1)
                .fig("qps", 100.0)
                .fig("only", 1.0),
            Row::new("q").label("n", 10).fig("qps", 50.0),
        ];
        let s = [
            s,
            vec![Row::new("load-interval").label("i", 0).fig("docs", 1.0)],
        ]
        .concat();
        let p = vec![
            Row::new("load-interval").label("i", 0).fig("docs", 2.0),
            Row::new("q").label("n", 10).fig("qps", 25.0),
            Row::new("q")
                .label("n", 1)
                .fig("qps", 200.0)
                .fig("zero", 0.0),
        ];
        let r = ratio_rows(&s, &p);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].get("qps"), Some(0.5));
        assert_eq!(r[0].get("only"), None);
        assert_eq!(r[1].get("qps"), Some(2.0));
        assert_eq!(r[1].target, "shale/peer");
    }

    #[test]
    fn rows_group_by_phase_in_first_seen_order() {
        let rows = [
            Row::new("b").label("i", 0),
            Row::new("a"),
            Row::new("b").label("i", 1),
        ];
        let groups = by_phase(&rows);
        let phases: Vec<&str> = groups.iter().map(|(p, _)| *p).collect();
        assert_eq!(phases, ["b", "a"]);
        assert_eq!(groups[0].1.len(), 2);
        assert_eq!(groups[0].1[1].label_value("i"), Some(&Value::from(1)));
    }

    #[test]
    fn figures_set_replaces() {
        let mut f = Figures::default();
        f.set("a", 1.0);
        f.set("a", 2.0);
        assert_eq!(f.0.len(), 1);
        assert_eq!(f.get("a"), Some(2.0));
        assert!(ratio(1.0, 0.0).is_nan());
    }
}
