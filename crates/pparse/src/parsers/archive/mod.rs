//! Archives: tar and zip, a folder on disk, and carving (files found by
//! their magic bytes in what no format claims). Their members become child
//! extractions.

pub(crate) mod carve;
pub(crate) mod folder;
pub(crate) mod tar;
pub(crate) mod zip;
