// Package hostinstall installs a shared library onto the host filesystem so
// that containers started at any moment see either the old or the new
// version, never a partly written file.
//
// The library is written to a versioned name next to the destination
// (<name>.<content hash>), synced, and then the destination, a relative
// symlink, is switched to it with one rename. Containers bind-mount the
// destination path, which the runtime resolves at container start, so a
// running container keeps the version it started with even after the next
// install replaces the link and prunes old versions.
package hostinstall
