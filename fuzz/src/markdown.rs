//! The page's Markdown parser (`ui::markdown::syntax`) and the pulldown-cmark reference the main
//! crate's unit tests check it against (`ui::markdown::reference`), mounted as they are.

#[path = "../../src/ui/markdown/syntax/mod.rs"]
pub mod syntax;

#[path = "../../src/ui/markdown/reference.rs"]
pub mod reference;

pub use syntax::{Node, parse, safe_href};
