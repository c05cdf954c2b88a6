// Package atomicfile replaces files so that a reader sees either the old or
// the new content, never a partly written file, also after a crash of the
// writer: the content goes to a temporary file next to the target, is synced,
// renamed over the target, and the directory is synced so the rename itself
// survives a power loss.
//
// The claim manager (configs, checkpoint, preload file), the host-pid mapper
// and the host installer of libvgpu.so all write through it. Temporary files
// are named <name>.tmp-<random>; RemoveTemps deletes the ones a crash left.
package atomicfile
