// Package attach is the wire format between the runtime and a container's monitor on
// the monitor's unix socket (attach.sock in the container's state directory).
//
// Every message is a frame: one type byte, a 4-byte big-endian length, then data.
// Client to monitor: Stdin, CloseStdin, Resize (4 bytes: width, height as uint16), ReopenLog.
// Monitor to client: Stdout, Stderr, Ack (the answer to ReopenLog; data is an error text, empty on success).
package attach

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame types.
const (
	Stdin      byte = 'i'
	CloseStdin byte = 'c'
	Resize     byte = 'r'
	ReopenLog  byte = 'l'
	Stdout     byte = 'o'
	Stderr     byte = 'e'
	Ack        byte = 'k'
)

// MaxFrame bounds a frame's data so a corrupt peer cannot make us allocate much.
const MaxFrame = 1 << 20

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, data []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(data)))
	if _, err := w.Write(append(h[:], data...)); err != nil {
		return fmt.Errorf("write frame %c: %w", typ, err)
	}
	return nil
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds %d", n, MaxFrame)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("read frame data: %w", err)
	}
	return h[0], data, nil
}

// ResizeData encodes a terminal size.
func ResizeData(width, height uint16) []byte {
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:], width)
	binary.BigEndian.PutUint16(b[2:], height)
	return b[:]
}

// ParseResize decodes ResizeData.
func ParseResize(b []byte) (width, height uint16, ok bool) {
	if len(b) != 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:]), true
}
