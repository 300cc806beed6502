//! Tables laid out like `kubectl get`: upper-case headers, columns padded to the widest cell
//! plus three spaces, no padding after the last column, empty cells left blank.

/// A table of text cells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows (each as long as `headers`).
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers.
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn push(&mut self, mut row: Vec<String>) {
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// Removes the columns whose cells are all empty (e.g. RELEASE when no CSV sets it).
    pub fn drop_empty_column(&mut self, header: &str) {
        let Some(i) = self.headers.iter().position(|h| h == header) else {
            return;
        };
        if self
            .rows
            .iter()
            .all(|r| r.get(i).is_none_or(String::is_empty))
        {
            self.headers.remove(i);
            for r in &mut self.rows {
                if i < r.len() {
                    r.remove(i);
                }
            }
        }
    }

    /// Renders the table, one line per row, each ending with a newline.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .chain(std::iter::once(&self.headers[i]))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i].saturating_sub(cell.chars().count()) + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_kubectl() {
        let mut t = Table::new(&["NAME", "DISPLAY", "VERSION", "REPLACES", "PHASE"]);
        t.push(vec![
            "memcached-operator.v0.2.0".into(),
            "Memcached Operator".into(),
            "0.2.0".into(),
            "memcached-operator.v0.1.0".into(),
            "Succeeded".into(),
        ]);
        t.push(vec![
            "other.v1.0.0".into(),
            "Other".into(),
            "1.0.0".into(),
            "".into(),
            "Installing".into(),
        ]);
        assert_eq!(
            t.render(),
            "NAME                        DISPLAY              VERSION   REPLACES                    PHASE\n\
             memcached-operator.v0.2.0   Memcached Operator   0.2.0     memcached-operator.v0.1.0   Succeeded\n\
             other.v1.0.0                Other                1.0.0                                 Installing\n"
        );
    }

    #[test]
    fn empty_columns_can_be_dropped() {
        let mut t = Table::new(&["NAME", "RELEASE", "PHASE"]);
        t.push(vec!["a".into(), "".into(), "Succeeded".into()]);
        t.drop_empty_column("RELEASE");
        assert_eq!(t.headers, vec!["NAME", "PHASE"]);
        assert_eq!(t.render(), "NAME   PHASE\na      Succeeded\n");
    }
}
