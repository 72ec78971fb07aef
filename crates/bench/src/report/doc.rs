//! The document model every report is built as: a title, the trademark notice,
//! and [`Block`]s. The renderers (`text.rs`, `html.rs`) turn one document into
//! each format, so the formats always carry the same figures.

/// One table cell; a failing cell is marked (`*` in text, red in HTML).
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    /// The figure or label as printed.
    pub(crate) text: String,
    /// Whether it fails its requirement.
    pub(crate) fail: bool,
}

impl Cell {
    /// A cell that fails its requirement when `fail`.
    pub(crate) fn marked(text: impl Into<String>, fail: bool) -> Cell {
        Cell {
            text: text.into(),
            fail,
        }
    }

    /// The text with its failure mark.
    pub(crate) fn shown(&self) -> String {
        if self.fail {
            format!("{}*", self.text)
        } else {
            self.text.clone()
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, fail: false }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_owned())
    }
}

/// A table: a header row (none when empty: a list of label–value rows) and
/// body rows. The first column is left-aligned; the others are right-aligned
/// (figures) unless `left` is set.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    /// Column titles.
    pub(crate) head: Vec<String>,
    /// Body rows.
    pub(crate) rows: Vec<Vec<Cell>>,
    /// Every column left-aligned (labels and prose, not figures).
    pub(crate) left: bool,
    /// The body row shaded in HTML (the median iteration, as the published
    /// pages shade it; the text marks it in its first cell).
    pub(crate) shaded: Option<usize>,
}

impl Table {
    /// An empty table with these column titles.
    pub(crate) fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            left: false,
            shaded: None,
        }
    }

    /// Adds a row.
    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }
}

/// Shorthand for a row of plain cells.
pub(crate) fn cells<const N: usize>(texts: [String; N]) -> Vec<Cell> {
    texts.into_iter().map(Cell::from).collect()
}

/// A piece of a report.
#[derive(Debug, Clone)]
pub(crate) enum Block {
    /// A section title (level 1) or a subsection title (level 2).
    Heading(u8, String),
    /// A paragraph, printed as is (it may hold line breaks).
    Para(String),
    /// A table.
    Table(Table),
    /// A bulleted list.
    List(Vec<String>),
    /// An inline SVG chart with its caption (HTML only).
    Chart(String, String),
    /// A framed box of the ways a run breaks the kit's run rules: a heading,
    /// one item per deviation, and a closing note (how to run the kit's run).
    Deviations {
        /// The box's heading.
        title: String,
        /// One line per deviation.
        items: Vec<String>,
        /// The sentence under the items.
        note: String,
    },
}

/// A whole report.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    /// The title line.
    pub(crate) title: String,
    /// The trademark notice under it.
    pub(crate) notice: String,
    /// Whether the result passed, when the report has one verdict (the HTML
    /// title is coloured by it).
    pub(crate) verdict: Option<bool>,
    /// The body.
    pub(crate) blocks: Vec<Block>,
}

impl Document {
    /// An empty document.
    pub(crate) fn new(title: String, notice: &str) -> Document {
        Document {
            title,
            notice: notice.to_owned(),
            verdict: None,
            blocks: Vec::new(),
        }
    }

    /// Adds a block.
    pub(crate) fn push(&mut self, block: Block) {
        self.blocks.push(block);
    }

    /// Adds a heading.
    pub(crate) fn heading(&mut self, level: u8, text: impl Into<String>) {
        self.push(Block::Heading(level, text.into()));
    }

    /// Adds a paragraph.
    pub(crate) fn para(&mut self, text: impl Into<String>) {
        self.push(Block::Para(text.into()));
    }

    /// Adds a table.
    pub(crate) fn table(&mut self, table: Table) {
        self.push(Block::Table(table));
    }
}
