//! Drawing upgrade graphs as text, Mermaid, Graphviz DOT and SVG.
//!
//! The SVG is laid out here, without graphviz: one horizontal lane per channel, one column per
//! version in semver order (shared by all lanes so a version lines up across channels), arcs
//! above the lane for `replaces`, below for `skips` (dashed) and `skipRange` (dotted), the head
//! highlighted, deprecated bundles struck through, names outside the channel drawn faint.
//! All output is deterministic: same catalog, same bytes.

use crate::graph::{ChannelGraph, Edge, EdgeKind, Node, PackageGraph};
use std::fmt::Write as _;

/// Output format of `bundle-tool graph`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// Indented text.
    Text,
    /// Mermaid flowchart.
    Mermaid,
    /// Graphviz DOT.
    Dot,
    /// Self-contained SVG.
    Svg,
}

fn node_label(n: &Node) -> String {
    match &n.version {
        Some(v) => format!("{} ({v})", n.name),
        None => n.name.clone(),
    }
}

/// Renders package graphs in `format`.
pub fn render(graphs: &[PackageGraph], format: GraphFormat) -> String {
    match format {
        GraphFormat::Text => graphs.iter().map(text).collect::<Vec<_>>().join("\n"),
        GraphFormat::Mermaid => graphs.iter().map(mermaid).collect::<Vec<_>>().join("\n"),
        GraphFormat::Dot => graphs.iter().map(dot).collect::<Vec<_>>().join("\n"),
        GraphFormat::Svg => svg(graphs),
    }
}

fn channel_title(c: &ChannelGraph) -> String {
    let mut s = format!("channel {}", c.name);
    if c.is_default {
        s.push_str(" (default)");
    }
    if c.deprecated.is_some() {
        s.push_str(" (deprecated)");
    }
    s
}

/// Plain text: per channel, the head(s) and each bundle with its edges.
pub fn text(g: &PackageGraph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "package {}", g.package);
    let _ = writeln!(out, "  default channel: {}", g.default_channel);
    if let Some(d) = &g.deprecated {
        let _ = writeln!(out, "  deprecated: {d}");
    }
    for c in &g.channels {
        let _ = writeln!(out, "  {}", channel_title(c));
        if let Some(d) = &c.deprecated {
            let _ = writeln!(out, "    deprecated: {d}");
        }
        match c.heads.as_slice() {
            [] => {
                let _ = writeln!(out, "    head: NONE (every entry is replaced or skipped)");
            }
            [h] => {
                let _ = writeln!(out, "    head: {h}");
            }
            many => {
                let _ = writeln!(
                    out,
                    "    heads: {} (INVALID: expected one)",
                    many.join(", ")
                );
            }
        }
        for n in c.nodes.iter().rev().filter(|n| n.in_channel) {
            let mut flags = Vec::new();
            if c.heads.contains(&n.name) {
                flags.push("head".to_string());
            }
            if n.deprecated.is_some() {
                flags.push("deprecated".to_string());
            }
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", flags.join(", "))
            };
            let _ = writeln!(out, "    {}{flags}", node_label(n));
            if !n.entry.replaces.is_empty() {
                let outside = if c.contains(&n.entry.replaces) {
                    ""
                } else {
                    " (not in this channel)"
                };
                let _ = writeln!(out, "      replaces {}{outside}", n.entry.replaces);
            }
            for s in &n.entry.skips {
                let _ = writeln!(out, "      skips {s}");
            }
            if !n.entry.skip_range.is_empty() {
                let covered: Vec<&str> = c
                    .edges
                    .iter()
                    .filter(|e| e.kind == EdgeKind::SkipRange && e.to == n.name)
                    .map(|e| e.from.as_str())
                    .collect();
                let covered = if covered.is_empty() {
                    "no bundle of this package".to_string()
                } else {
                    covered.join(", ")
                };
                let _ = writeln!(
                    out,
                    "      skipRange {:?} (covers {covered})",
                    n.entry.skip_range
                );
            }
        }
    }
    out
}

fn id(prefix: &str, ci: usize, ni: usize) -> String {
    format!("{prefix}{ci}_{ni}")
}

fn mermaid_escape(s: &str) -> String {
    s.replace('"', "#quot;")
}

/// A Mermaid flowchart: one subgraph per channel.
pub fn mermaid(g: &PackageGraph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {} upgrade graph\n---", g.package);
    let _ = writeln!(out, "flowchart LR");
    let mut heads = Vec::new();
    let mut deprecated = Vec::new();
    let mut outside = Vec::new();
    let mut links = Vec::new();
    for (ci, c) in g.channels.iter().enumerate() {
        let _ = writeln!(
            out,
            "  subgraph ch{ci}[\"{}\"]",
            mermaid_escape(&channel_title(c))
        );
        let _ = writeln!(out, "    direction LR");
        for (ni, n) in c.nodes.iter().enumerate() {
            let label = match &n.version {
                Some(v) => format!("{v}<br/><small>{}</small>", n.name),
                None => n.name.clone(),
            };
            let _ = writeln!(
                out,
                "    {}[\"{}\"]",
                id("n", ci, ni),
                mermaid_escape(&label)
            );
            if c.heads.contains(&n.name) {
                heads.push(id("n", ci, ni));
            }
            if n.deprecated.is_some() {
                deprecated.push(id("n", ci, ni));
            }
            if !n.in_channel {
                outside.push(id("n", ci, ni));
            }
        }
        let _ = writeln!(out, "  end");
        let idx = |name: &str| c.nodes.iter().position(|n| n.name == name);
        for e in &c.edges {
            let (Some(a), Some(b)) = (idx(&e.from), idx(&e.to)) else {
                continue;
            };
            let arrow = match e.kind {
                EdgeKind::Replaces => "-->",
                EdgeKind::Skips => "-.->",
                EdgeKind::SkipRange => "-.->",
            };
            links.push(format!(
                "  {} {arrow}|{}| {}",
                id("n", ci, a),
                e.kind.as_str(),
                id("n", ci, b)
            ));
        }
    }
    for l in links {
        let _ = writeln!(out, "{l}");
    }
    let _ = writeln!(
        out,
        "  classDef head stroke:#1a7f37,stroke-width:3px,fill:#dafbe1"
    );
    let _ = writeln!(
        out,
        "  classDef deprecated color:#888,text-decoration:line-through"
    );
    let _ = writeln!(out, "  classDef outside stroke-dasharray:4 3,color:#888");
    for (class, ids) in [
        ("head", heads),
        ("deprecated", deprecated),
        ("outside", outside),
    ] {
        if !ids.is_empty() {
            let _ = writeln!(out, "  class {} {class}", ids.join(","));
        }
    }
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Graphviz DOT: one cluster per channel.
pub fn dot(g: &PackageGraph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&g.package));
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  label=\"{} (default channel: {})\"; labelloc=t;",
        dot_escape(&g.package),
        dot_escape(&g.default_channel)
    );
    let _ = writeln!(
        out,
        "  node [shape=box, style=rounded, fontname=\"Helvetica\"];"
    );
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=10];");
    for (ci, c) in g.channels.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{ci} {{");
        let _ = writeln!(out, "    label=\"{}\";", dot_escape(&channel_title(c)));
        for (ni, n) in c.nodes.iter().enumerate() {
            let text = match &n.version {
                Some(v) => format!(
                    "{}<BR/><FONT POINT-SIZE=\"9\">{}</FONT>",
                    html_escape(v),
                    html_escape(&n.name)
                ),
                None => html_escape(&n.name),
            };
            let label = if n.deprecated.is_some() {
                format!("<<S>{text}</S>>")
            } else {
                format!("<{text}>")
            };
            let mut attrs = vec![format!("label={label}")];
            if c.heads.contains(&n.name) {
                attrs.push("penwidth=3".into());
                attrs.push("style=\"rounded,filled\"".into());
                attrs.push("fillcolor=\"#dafbe1\"".into());
                attrs.push("color=\"#1a7f37\"".into());
            }
            if n.deprecated.is_some() {
                attrs.push("fontcolor=gray50".into());
            }
            if !n.in_channel {
                attrs.push("style=\"rounded,dashed\"".into());
                attrs.push("fontcolor=gray50".into());
            }
            let _ = writeln!(out, "    {} [{}];", id("n", ci, ni), attrs.join(", "));
        }
        let _ = writeln!(out, "  }}");
        let idx = |name: &str| c.nodes.iter().position(|n| n.name == name);
        for e in &c.edges {
            let (Some(a), Some(b)) = (idx(&e.from), idx(&e.to)) else {
                continue;
            };
            let style = match e.kind {
                EdgeKind::Replaces => "solid",
                EdgeKind::Skips => "dashed",
                EdgeKind::SkipRange => "dotted",
            };
            let _ = writeln!(
                out,
                "  {} -> {} [label=\"{}\", style={style}];",
                id("n", ci, a),
                id("n", ci, b),
                e.kind.as_str()
            );
        }
    }
    let _ = writeln!(out, "}}");
    out
}

const COL_W: i64 = 170;
const NODE_W: i64 = 152;
const NODE_H: i64 = 40;
const LANE_H: i64 = 160;
/// Room between an arc's farthest point and its lane's edge (the arrow heads and the stroke
/// need a few pixels; an arc must never reach into the next lane).
const ARC_MARGIN: i64 = 8;
/// How far an arc may bow away from the node edge it starts on and stay in its lane.
const ARC_ROOM: i64 = LANE_H / 2 - NODE_H / 2 - ARC_MARGIN;
/// Estimated advance of one character of the 11px legend text (Helvetica/Arial average is
/// about 0.55em; rounded up so the canvas errs on the wide side).
const LEGEND_CHAR_W: i64 = 7;
const LEFT: i64 = 190;
const TOP: i64 = 80;

fn edge_style(kind: EdgeKind) -> (&'static str, &'static str, &'static str) {
    // (color, dasharray, marker id)
    match kind {
        EdgeKind::Replaces => ("#0969da", "", "arrow-replaces"),
        EdgeKind::Skips => ("#bc4c00", "6 4", "arrow-skips"),
        EdgeKind::SkipRange => ("#8250df", "2 3", "arrow-skiprange"),
    }
}

/// A self-contained SVG of all packages (one block of lanes per package).
pub fn svg(graphs: &[PackageGraph]) -> String {
    let mut body = String::new();
    let mut y0 = TOP;
    let (legend, legend_right) = legend();
    // The canvas holds the widest package and the legend, whichever is wider. Lanes are drawn
    // as wide as the canvas is when their package is reached (the widths so far).
    let mut width = (LEFT + COL_W * 2).max(legend_right + 16);
    for g in graphs {
        let columns = g.ordered_bundles();
        width = width.max(LEFT + COL_W * columns.len() as i64 + 40);
        let col = |name: &str| columns.iter().position(|n| n == name).unwrap_or(0) as i64;
        let _ = writeln!(
            body,
            "<text x=\"16\" y=\"{}\" class=\"pkg\">{}{}</text>",
            y0 + 4,
            html_escape(&g.package),
            g.deprecated
                .as_ref()
                .map(|d| format!(" — deprecated: {}", html_escape(d)))
                .unwrap_or_default()
        );
        y0 += 16;
        for (li, c) in g.channels.iter().enumerate() {
            let lane_top = y0 + li as i64 * LANE_H;
            let cy = lane_top + LANE_H / 2;
            svg_lane(&mut body, c, li, lane_top, width);
            // Edges first so that nodes are drawn over them.
            for e in &c.edges {
                svg_edge(&mut body, c, e, cy, &col);
            }
            for n in &c.nodes {
                svg_node(&mut body, c, n, cy, &col);
            }
        }
        y0 += g.channels.len() as i64 * LANE_H + 40;
    }
    svg_document(width, y0, &legend, &body)
}

/// A channel's lane: background, name, and what is special about it.
fn svg_lane(body: &mut String, c: &ChannelGraph, li: usize, lane_top: i64, width: i64) {
    let cy = lane_top + LANE_H / 2;
    let fill = if li.is_multiple_of(2) {
        "#f6f8fa"
    } else {
        "#ffffff"
    };
    let _ = writeln!(
        body,
        "<rect x=\"8\" y=\"{lane_top}\" width=\"{}\" height=\"{LANE_H}\" fill=\"{fill}\" stroke=\"#d0d7de\"/>",
        width - 16
    );
    let _ = writeln!(
        body,
        "<text x=\"16\" y=\"{}\" class=\"lane{}\">{}</text>",
        cy - 6,
        if c.deprecated.is_some() {
            " struck"
        } else {
            ""
        },
        html_escape(&c.name)
    );
    let mut sub = Vec::new();
    if c.is_default {
        sub.push("default".to_string());
    }
    match c.heads.len() {
        1 => {}
        0 => sub.push("NO HEAD".into()),
        n => sub.push(format!("{n} HEADS")),
    }
    if c.deprecated.is_some() {
        sub.push("deprecated".into());
    }
    if !sub.is_empty() {
        let _ = writeln!(
            body,
            "<text x=\"16\" y=\"{}\" class=\"sub\">{}</text>",
            cy + 12,
            html_escape(&sub.join(" · "))
        );
    }
}

/// One edge as an arc between the columns of its bundles (none when an end is not drawn).
fn svg_edge(body: &mut String, c: &ChannelGraph, e: &Edge, cy: i64, col: &dyn Fn(&str) -> i64) {
    let (Some(_), Some(_)) = (c.node(&e.from), c.node(&e.to)) else {
        return;
    };
    let x1 = LEFT + col(&e.from) * COL_W + COL_W / 2;
    let x2 = LEFT + col(&e.to) * COL_W + COL_W / 2;
    let span = (x2 - x1).abs().max(COL_W);
    let (color, dash, marker) = edge_style(e.kind);
    // replaces above the lane's centre line, skips and skipRange below. A
    // quadratic curve from sy with its control point 2*bend away reaches sy + bend
    // at its farthest, so |bend| <= ARC_ROOM keeps every arc inside its lane; skips
    // stay flatter than skipRanges so the two stay apart.
    let (sy, bend) = match e.kind {
        EdgeKind::Replaces => (cy - NODE_H / 2, -(18 + span / 10).min(ARC_ROOM)),
        EdgeKind::Skips => (cy + NODE_H / 2, (14 + span / 12).min(ARC_ROOM - 12)),
        EdgeKind::SkipRange => (cy + NODE_H / 2, (26 + span / 10).min(ARC_ROOM)),
    };
    let mx = (x1 + x2) / 2;
    let dash_attr = if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    };
    let _ = writeln!(
        body,
        "<path d=\"M{x1},{sy} Q{mx},{} {x2},{sy}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\"{dash_attr} marker-end=\"url(#{marker})\"><title>{} {} {}</title></path>",
        sy + 2 * bend,
        html_escape(&e.to),
        e.kind.as_str(),
        html_escape(&e.from)
    );
}

/// One bundle box: version, name, deprecation strike and head badge.
fn svg_node(body: &mut String, c: &ChannelGraph, n: &Node, cy: i64, col: &dyn Fn(&str) -> i64) {
    let x = LEFT + col(&n.name) * COL_W + (COL_W - NODE_W) / 2;
    let y = cy - NODE_H / 2;
    let is_head = c.heads.contains(&n.name);
    let class = if is_head {
        "node head"
    } else if !n.in_channel {
        "node outside"
    } else {
        "node"
    };
    let _ = writeln!(
        body,
        "<g class=\"{class}\"><title>{}{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"8\"/>",
        html_escape(&n.name),
        n.deprecated
            .as_ref()
            .map(|d| format!(" (deprecated: {})", html_escape(d)))
            .unwrap_or_default()
    );
    let main = n.version.clone().unwrap_or_else(|| n.name.clone());
    let main = if main.chars().count() > 18 {
        format!("{}…", main.chars().take(17).collect::<String>())
    } else {
        main
    };
    let struck = if n.deprecated.is_some() {
        " struck"
    } else {
        ""
    };
    let _ = writeln!(
        body,
        "<text x=\"{}\" y=\"{}\" class=\"ver{struck}\">{}</text>",
        x + NODE_W / 2,
        y + 17,
        html_escape(&main)
    );
    let small: String = if n.name.chars().count() > 28 {
        format!(
            "…{}",
            n.name
                .chars()
                .rev()
                .take(23)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<String>()
        )
    } else {
        n.name.clone()
    };
    let _ = writeln!(
        body,
        "<text x=\"{}\" y=\"{}\" class=\"name{struck}\">{}</text>",
        x + NODE_W / 2,
        y + 31,
        html_escape(&small)
    );
    if n.deprecated.is_some() {
        let _ = writeln!(
            body,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"strike\"/>",
            x + 8,
            y + NODE_H / 2,
            x + NODE_W - 8,
            y + NODE_H / 2
        );
    }
    if is_head {
        let _ = writeln!(
            body,
            "<text x=\"{}\" y=\"{}\" class=\"badge\">HEAD</text>",
            x + NODE_W - 4,
            y - 4
        );
    }
    let _ = writeln!(body, "</g>");
}

/// The SVG document around the drawn body: styles, arrow markers, background, legend.
fn svg_document(width: i64, height: i64, legend: &str, body: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"Helvetica, Arial, sans-serif\">"
    );
    let _ = writeln!(
        out,
        "<style>.pkg{{font-size:18px;font-weight:bold}}.lane{{font-size:14px;font-weight:bold}}.sub{{font-size:11px;fill:#57606a}}.node rect{{fill:#fff;stroke:#57606a;stroke-width:1.2}}.node.head rect{{fill:#dafbe1;stroke:#1a7f37;stroke-width:3}}.node.outside rect{{fill:none;stroke:#8c959f;stroke-dasharray:4 3}}.node.outside text{{fill:#8c959f}}.ver{{font-size:13px;font-weight:bold;text-anchor:middle}}.name{{font-size:9px;fill:#57606a;text-anchor:middle}}.struck{{text-decoration:line-through;fill:#8c959f}}.strike{{stroke:#cf222e;stroke-width:1.5}}.badge{{font-size:10px;font-weight:bold;fill:#1a7f37;text-anchor:end}}.legend{{font-size:11px}}</style>"
    );
    let _ = writeln!(out, "<defs>");
    for kind in [EdgeKind::Replaces, EdgeKind::Skips, EdgeKind::SkipRange] {
        let (color, _, marker) = edge_style(kind);
        let _ = writeln!(
            out,
            "<marker id=\"{marker}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{color}\"/></marker>"
        );
    }
    let _ = writeln!(out, "</defs>");
    let _ = writeln!(
        out,
        "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>"
    );
    out.push_str(legend);
    out.push_str(body);
    let _ = writeln!(out, "</svg>");
    out
}

/// The legend row at the top, and the x where its last text ends (estimated from its length).
fn legend() -> (String, i64) {
    let mut out = String::new();
    let text_w = |t: &str| t.chars().count() as i64 * LEGEND_CHAR_W;
    let mut lx = 16;
    let mut right = lx;
    for kind in [EdgeKind::Replaces, EdgeKind::Skips, EdgeKind::SkipRange] {
        let (color, dash, marker) = edge_style(kind);
        let dash_attr = if dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{dash}\"")
        };
        let label = format!("{} (older → newer)", kind.as_str());
        let _ = writeln!(
            out,
            "<line x1=\"{lx}\" y1=\"24\" x2=\"{}\" y2=\"24\" stroke=\"{color}\" stroke-width=\"1.6\"{dash_attr} marker-end=\"url(#{marker})\"/><text x=\"{}\" y=\"28\" class=\"legend\">{label}</text>",
            lx + 36,
            lx + 44,
        );
        right = lx + 44 + text_w(&label);
        lx = right + 24;
    }
    let _ = writeln!(
        out,
        "<rect x=\"{lx}\" y=\"14\" width=\"28\" height=\"18\" rx=\"5\" fill=\"#dafbe1\" stroke=\"#1a7f37\" stroke-width=\"3\"/><text x=\"{}\" y=\"28\" class=\"legend\">channel head</text>",
        lx + 34
    );
    lx += 34 + text_w("channel head") + 24;
    let _ = writeln!(
        out,
        "<text x=\"{lx}\" y=\"28\" class=\"legend struck\">deprecated</text>"
    );
    lx += text_w("deprecated") + 24;
    let _ = writeln!(
        out,
        "<rect x=\"{lx}\" y=\"14\" width=\"28\" height=\"18\" rx=\"5\" fill=\"none\" stroke=\"#8c959f\" stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"28\" class=\"legend\">not in channel</text>",
        lx + 34
    );
    right = right.max(lx + 34 + text_w("not in channel"));
    (out, right)
}
