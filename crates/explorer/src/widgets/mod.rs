//! Drawing helpers the panes share, each knowing nothing of the app: a
//! virtualised tree view and the explorer's two tree models over the shared
//! tree, the hex grid's geometry, and the text view's highlighting.

pub mod folders;
pub(crate) mod hexgrid;
pub mod models;
pub mod text;
pub mod treeview;
