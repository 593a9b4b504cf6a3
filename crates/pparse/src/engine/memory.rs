//! Giving memory the allocator keeps but nobody uses back to the system.
//! Apart because it is platform code, called by the engine between steps
//! and by the explorer when it drops large state.

/// Hands memory that the allocator holds but nobody uses back to the system.
/// A parse allocates and frees decoder state for every nested stream (a tar
/// of 23,000 `.gz` files makes as many decoders); glibc keeps the freed pages,
/// and RSS crept up to twice the live heap without this.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}
