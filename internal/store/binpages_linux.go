package store

import (
	"debug/elf"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// releaseBinaryPages asks the kernel to reclaim the resident pages of this
// binary's read-only segments — code and read-only data, clean file pages —
// once the store serves. The one quantykube binary carries the runtime,
// the operator and the installer beside the store, and the start runs the
// init code of every package it links and faults in pages around every one
// it touches: ~29 MiB of an idle store's RSS that the store never touches
// again (idle: 60 MiB against 32 MiB for a binary of the store's packages
// alone; ADR 001, "Memory"). A page the store does use comes back at its
// next touch. Nothing is lost: MADV_PAGEOUT reclaims only what the kernel
// can read back from the file; the writable segment, the heap and pebble's
// memory are outside the range. It returns the bytes it asked for, or an
// error when it cannot tell the range (a position-independent build) or
// the kernel refuses (older than 5.4): then nothing changed.
func releaseBinaryPages() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := elf.Open(exe)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return 0, fmt.Errorf("%s is position-independent (%v): its segments' addresses are not known", exe, f.Type)
	}
	lo, end, writable := ^uint64(0), uint64(0), ^uint64(0)
	for _, p := range f.Progs {
		switch {
		case p.Type != elf.PT_LOAD:
		case p.Flags&elf.PF_W != 0:
			writable = min(writable, p.Vaddr)
		default:
			lo, end = min(lo, p.Vaddr), max(end, p.Vaddr+p.Memsz)
		}
	}
	page := uint64(os.Getpagesize())
	lo, hi := (lo+page-1)/page*page, min(end, writable)/page*page // whole pages of read-only segments only
	if lo >= hi {
		return 0, fmt.Errorf("%s: no read-only segment", exe)
	}
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_PAGEOUT); errno != 0 {
		return 0, fmt.Errorf("madvise(MADV_PAGEOUT) of %s's read-only segments: %w", exe, errno)
	}
	return int(hi - lo), nil
}
