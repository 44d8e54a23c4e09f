// Package store keeps the runtime's sandbox and container records in memory and on disk.
//
// Invariants: every record in memory has a file <dir>/<id>/meta.json written before Put
// returns, so a restarted runtime recovers exactly the records it acknowledged; names are
// unique among live records (Reserve fails with ErrNameInUse for a second holder).
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ErrNotFound is returned for an unknown ID.
var ErrNotFound = errors.New("not found")

// ErrNameInUse is returned by Reserve when another record holds the name.
var ErrNameInUse = errors.New("name is reserved")

// MetaFile is the record's file name inside its directory.
const MetaFile = "meta.json"

// Record is what a store holds.
type Record interface {
	GetID() string
	GetName() string
}

// Store is a set of records of one kind, persisted below Dir.
type Store[T Record] struct {
	Dir   string
	mu    sync.RWMutex
	byID  map[string]T
	names map[string]string // name -> id
}

// New makes an empty store rooted at dir (created if missing).
func New[T Record](dir string) (*Store[T], error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	return &Store[T]{Dir: dir, byID: map[string]T{}, names: map[string]string{}}, nil
}

// RecordDir is the directory of record id.
func (s *Store[T]) RecordDir(id string) string { return filepath.Join(s.Dir, id) }

// Reserve claims name for id. It is idempotent for the same id.
func (s *Store[T]) Reserve(name, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.names[name]; ok && cur != id {
		return fmt.Errorf("%w: %q is used by %s", ErrNameInUse, name, cur)
	}
	s.names[name] = id
	return nil
}

// Release frees name if id holds it.
func (s *Store[T]) Release(name, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names[name] == id {
		delete(s.names, name)
	}
}

// Put writes r to disk (atomically) and then to memory.
func (s *Store[T]) Put(r T) error {
	dir := s.RecordDir(r.GetID())
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create record dir: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", r.GetID(), err)
	}
	tmp := filepath.Join(dir, MetaFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write record %s: %w", r.GetID(), err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, MetaFile)); err != nil {
		return fmt.Errorf("commit record %s: %w", r.GetID(), err)
	}
	s.mu.Lock()
	s.byID[r.GetID()] = r
	s.names[r.GetName()] = r.GetID()
	s.mu.Unlock()
	return nil
}

// Get returns the record or ErrNotFound.
func (s *Store[T]) Get(id string) (T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byID[id]
	if !ok {
		return r, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return r, nil
}

// Resolve finds a record by full ID or by a unique ID prefix.
func (s *Store[T]) Resolve(idOrPrefix string) (T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var zero T
	if idOrPrefix == "" {
		return zero, fmt.Errorf("empty id: %w", ErrNotFound)
	}
	if r, ok := s.byID[idOrPrefix]; ok {
		return r, nil
	}
	var found []T
	for id, r := range s.byID {
		if len(id) >= len(idOrPrefix) && id[:len(idOrPrefix)] == idOrPrefix {
			found = append(found, r)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	if len(found) > 1 {
		return zero, fmt.Errorf("id prefix %q is ambiguous (%d matches)", idOrPrefix, len(found))
	}
	return zero, fmt.Errorf("%s: %w", idOrPrefix, ErrNotFound)
}

// Delete removes the record from memory and disk and releases its name.
func (s *Store[T]) Delete(id string) error {
	s.mu.Lock()
	r, ok := s.byID[id]
	if ok {
		delete(s.byID, id)
		if s.names[r.GetName()] == id {
			delete(s.names, r.GetName())
		}
	}
	s.mu.Unlock()
	if err := os.RemoveAll(s.RecordDir(id)); err != nil {
		return fmt.Errorf("remove record %s: %w", id, err)
	}
	return nil
}

// List returns all records sorted by ID.
func (s *Store[T]) List() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.byID))
	for _, r := range s.byID {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetID() < out[j].GetID() })
	return out
}

// Load reads every record from disk. Directories without a readable meta.json are
// returned as orphans (a create that crashed before Put) for the caller to clean up.
func (s *Store[T]) Load(decode func([]byte) (T, error)) (orphans []string, err error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("read store %s: %w", s.Dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.Dir, e.Name(), MetaFile))
		if err != nil {
			orphans = append(orphans, e.Name())
			continue
		}
		r, err := decode(b)
		if err != nil {
			orphans = append(orphans, e.Name())
			continue
		}
		s.mu.Lock()
		s.byID[r.GetID()] = r
		s.names[r.GetName()] = r.GetID()
		s.mu.Unlock()
	}
	return orphans, nil
}
