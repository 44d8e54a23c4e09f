package monitor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ExitFileName is the file in a container's state directory that the monitor writes
// once, atomically, when the container's init process has exited. Its presence is the
// runtime's only signal that a container has exited; it survives runtime restarts.
const ExitFileName = "exit.json"

// Exit is the recorded end of a container.
type Exit struct {
	Code       int32     `json:"exit_code"`
	FinishedAt time.Time `json:"finished_at"`
	// Reason is "OOMKilled" when the memory cgroup killed the process, else empty.
	Reason string `json:"reason,omitempty"`
}

// WriteExit records e in dir atomically (write beside, then rename).
func WriteExit(dir string, e Exit) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode exit: %w", err)
	}
	tmp := filepath.Join(dir, ExitFileName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ExitFileName)); err != nil {
		return fmt.Errorf("rename exit file: %w", err)
	}
	return nil
}

// ReadExit returns the recorded exit, or ok=false when the container has not exited.
func ReadExit(dir string) (e Exit, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ExitFileName))
	if os.IsNotExist(err) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("read exit file: %w", err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, false, fmt.Errorf("decode exit file in %s: %w", dir, err)
	}
	return e, true, nil
}
