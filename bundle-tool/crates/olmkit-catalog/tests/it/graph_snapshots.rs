//! Snapshots of `bundle-tool graph` output for a catalog with every graph feature.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{LoadOptions, load_dir};
use olmkit_catalog::graph::package_graphs;
use olmkit_catalog::graph_draw::{GraphFormat, render};
use std::path::Path;

fn graphs() -> Vec<olmkit_catalog::graph::PackageGraph> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/catalog/graph-demo");
    package_graphs(&load_dir(&dir, &LoadOptions::graph_only()).unwrap())
}

#[test]
fn text() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Text));
}

#[test]
fn mermaid() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Mermaid));
}

#[test]
fn dot() {
    insta::assert_snapshot!(render(&graphs(), GraphFormat::Dot));
}

#[test]
fn svg() {
    let svg = render(&graphs(), GraphFormat::Svg);
    // well-formed enough for browsers: one root, balanced groups
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
    insta::assert_snapshot!(svg);
}

#[test]
fn graph_model_facts() {
    let g = &graphs()[0];
    let stable = g.channel("stable").unwrap();
    assert_eq!(stable.head(), Some("memcached-operator.v0.4.0"));
    assert!(stable.is_default);
    // external replaces target and skipRange edges are present
    assert!(
        stable
            .nodes
            .iter()
            .any(|n| n.name == "memcached-operator.v0.1.0" && !n.in_channel)
    );
    assert!(
        stable
            .edges
            .iter()
            .any(|e| e.kind == olmkit_catalog::graph::EdgeKind::SkipRange
                && e.from == "memcached-operator.v0.2.0"
                && e.to == "memcached-operator.v0.4.0")
    );
    let alpha = g.channel("alpha").unwrap();
    assert!(alpha.deprecated.is_some());
    assert!(
        alpha
            .node("memcached-operator.v0.1.0")
            .unwrap()
            .deprecated
            .is_some()
    );
}

// --- SVG geometry: everything drawn lies inside the canvas, and every arc stays inside the
// lane it belongs to, for small, medium and large packages.

/// A package with `n` versions: `stable` has them all (replaces chain, a skipRange `<v` on
/// every entry from the third on, a skips edge every fifth), `fast` the upper half with a
/// replaces into the lower half (drawn as a node outside the channel).
fn generated(n: usize) -> Vec<olmkit_catalog::graph::PackageGraph> {
    let v = |i: usize| format!("{}.{}.0", i / 10, i % 10);
    let name = |i: usize| format!("op.v{}", v(i));
    let mut lines = vec![
        serde_json::json!({"schema": "olm.package", "name": "op", "defaultChannel": "stable"}),
    ];
    let entry = |i: usize| {
        let mut e = serde_json::json!({"name": name(i)});
        if i > 0 {
            e["replaces"] = name(i - 1).into();
        }
        if i >= 2 {
            e["skipRange"] = format!("<{}", v(i)).into();
        }
        if i >= 2 && i.is_multiple_of(5) {
            e["skips"] = serde_json::json!([name(i - 2)]);
        }
        e
    };
    lines.push(
        serde_json::json!({"schema": "olm.channel", "package": "op", "name": "stable",
        "entries": (0..n).map(entry).collect::<Vec<_>>()}),
    );
    lines.push(
        serde_json::json!({"schema": "olm.channel", "package": "op", "name": "fast",
        "entries": (n / 2..n).map(entry).collect::<Vec<_>>()}),
    );
    for i in 0..n {
        lines.push(serde_json::json!({"schema": "olm.bundle", "package": "op", "name": name(i),
            "image": format!("example.com/op-bundle:v{}", v(i)),
            "properties": [{"type": "olm.package", "value": {"packageName": "op", "version": v(i)}}]}));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("op")).unwrap();
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(dir.path().join("op/catalog.json"), text.join("\n")).unwrap();
    package_graphs(&load_dir(dir.path(), &LoadOptions::graph_only()).unwrap())
}

/// The numeric attribute `name` of a tag's text.
fn attr(tag: &str, name: &str) -> Option<f64> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = start + tag[start..].find('"')?;
    tag[start..end].parse().ok()
}

/// Every element of kind `element` (`rect`, `text`...): its opening tag and, for text, its
/// content.
fn elements<'a>(svg: &'a str, element: &str) -> Vec<(&'a str, &'a str)> {
    let open = format!("<{element} ");
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i..];
        let end = rest.find('>').unwrap();
        let tag = &rest[..=end];
        let content = rest[end + 1..].split('<').next().unwrap_or("");
        out.push((tag, content));
        rest = &rest[end..];
    }
    out
}

/// Bounding boxes (x0, y0, x1, y1) of every shape and text (text extents estimated
/// generously: 0.6em per character).
fn boxes(svg: &str) -> Vec<(String, f64, f64, f64, f64)> {
    let mut out = Vec::new();
    for (tag, _) in elements(svg, "rect") {
        let (Some(w), Some(h)) = (attr(tag, "width"), attr(tag, "height")) else {
            continue; // the 100% background
        };
        let x = attr(tag, "x").unwrap_or(0.0);
        let y = attr(tag, "y").unwrap_or(0.0);
        out.push((tag.to_string(), x, y, x + w, y + h));
    }
    for (tag, _) in elements(svg, "line") {
        let xs = [attr(tag, "x1").unwrap(), attr(tag, "x2").unwrap()];
        let ys = [attr(tag, "y1").unwrap(), attr(tag, "y2").unwrap()];
        out.push((
            tag.to_string(),
            xs[0].min(xs[1]),
            ys[0].min(ys[1]),
            xs[0].max(xs[1]),
            ys[0].max(ys[1]),
        ));
    }
    for (tag, content) in elements(svg, "text") {
        let class = tag
            .split("class=\"")
            .nth(1)
            .and_then(|c| c.split('"').next())
            .unwrap_or("");
        let (size, anchor) = match class.split(' ').next().unwrap() {
            "pkg" => (18.0, "start"),
            "lane" => (14.0, "start"),
            "ver" => (13.0, "middle"),
            "name" => (9.0, "middle"),
            "badge" => (10.0, "end"),
            _ => (11.0, "start"),
        };
        let chars = content
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .chars()
            .count();
        let w = chars as f64 * size * 0.6;
        let (x, y) = (attr(tag, "x").unwrap(), attr(tag, "y").unwrap());
        let x0 = match anchor {
            "middle" => x - w / 2.0,
            "end" => x - w,
            _ => x,
        };
        out.push((
            format!("{tag}{content}"),
            x0,
            y - size,
            x0 + w,
            y + size * 0.3,
        ));
    }
    for (tag, _) in elements(svg, "path") {
        if let Some((x1, sy, _, cy, x2, _)) = arc(tag) {
            let extreme = (sy + cy) / 2.0;
            out.push((
                tag.to_string(),
                x1.min(x2),
                sy.min(extreme),
                x1.max(x2),
                sy.max(extreme),
            ));
        }
    }
    out
}

/// An arc's `M x1,sy Q mx,cy x2,sy2`.
fn arc(tag: &str) -> Option<(f64, f64, f64, f64, f64, f64)> {
    let d = tag.split(" d=\"M").nth(1)?.split('"').next()?;
    if !d.contains('Q') {
        return None; // the arrow heads' own paths
    }
    let nums: Vec<f64> = d
        .split([',', ' ', 'Q'])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    match nums[..] {
        [a, b, c, e, f, g] => Some((a, b, c, e, f, g)),
        _ => None,
    }
}

fn check_geometry(n: usize) {
    let svg = render(&generated(n), GraphFormat::Svg);
    if let Some(dir) = std::env::var_os("GRAPH_SVG_DIR") {
        std::fs::write(Path::new(&dir).join(format!("graph-{n}.svg")), &svg).unwrap();
    }
    let root = elements(&svg, "svg")[0].0;
    let (w, h) = (attr(root, "width").unwrap(), attr(root, "height").unwrap());
    assert!(root.contains(&format!("viewBox=\"0 0 {w} {h}\"")), "{root}");
    let all = boxes(&svg);
    assert!(
        all.len() > n * 2,
        "{n} versions drew only {} shapes",
        all.len()
    );
    for (what, x0, y0, x1, y1) in &all {
        assert!(
            *x0 >= 0.0 && *y0 >= 0.0 && *x1 <= w && *y1 <= h,
            "{n} versions: {what} ({x0},{y0})-({x1},{y1}) is outside the {w}x{h} canvas"
        );
    }
    // Lanes: the channel bands; every arc's start and farthest point lie in the same one.
    let lanes: Vec<(f64, f64)> = elements(&svg, "rect")
        .into_iter()
        .filter(|(t, _)| t.contains("stroke=\"#d0d7de\""))
        .map(|(t, _)| {
            let y = attr(t, "y").unwrap();
            (y, y + attr(t, "height").unwrap())
        })
        .collect();
    assert_eq!(lanes.len(), 2, "two channels, two lanes");
    let mut arcs = 0;
    for (tag, _) in elements(&svg, "path") {
        let Some((_, sy, _, cy, _, sy2)) = arc(tag) else {
            continue;
        };
        arcs += 1;
        assert_eq!(sy, sy2, "{tag}");
        let (top, bottom) = *lanes
            .iter()
            .find(|(t, b)| sy > *t && sy < *b)
            .unwrap_or_else(|| panic!("{tag} starts in no lane"));
        let extreme = (sy + cy) / 2.0;
        assert!(
            extreme >= top + 4.0 && extreme <= bottom - 4.0,
            "{n} versions: {tag} reaches y={extreme}, outside its lane {top}..{bottom}"
        );
    }
    assert!(arcs >= n, "{n} versions drew only {arcs} arcs");
}

#[test]
fn svg_geometry_3_versions() {
    check_geometry(3);
}

#[test]
fn svg_geometry_10_versions() {
    check_geometry(10);
}

#[test]
fn svg_geometry_100_versions() {
    check_geometry(100);
}

#[test]
fn svg_geometry_of_the_demo_catalog() {
    let svg = render(&graphs(), GraphFormat::Svg);
    let root = elements(&svg, "svg")[0].0;
    let (w, h) = (attr(root, "width").unwrap(), attr(root, "height").unwrap());
    for (what, x0, y0, x1, y1) in boxes(&svg) {
        assert!(
            x0 >= 0.0 && y0 >= 0.0 && x1 <= w && y1 <= h,
            "{what} ({x0},{y0})-({x1},{y1}) is outside the {w}x{h} canvas"
        );
    }
}
