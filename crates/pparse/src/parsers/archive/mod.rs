//! Archives: tar and zip, a folder on disk, and carving (files found by
//! their magic bytes in what no format claims). Their members become child
//! extractions.

pub mod carve;
pub mod folder;
pub mod tar;
pub mod zip;
