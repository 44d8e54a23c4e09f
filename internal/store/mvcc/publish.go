package mvcc

// beginCommit marks a batch that changes m/rev as being committed: until
// endCommit, readView pairs no snapshot with s.rev and waits instead. The
// channel is stored before commitSeq turns odd, so a reader that sees it odd
// waits on this commit's channel (or a later one's), never an earlier,
// already closed one. One committer at a time: the group committer, or an
// import's finish on a store that serves nothing yet.
func (s *Store) beginCommit() {
	ch := make(chan struct{})
	s.committed.Store(&ch)
	s.commitSeq.Add(1)
}

// endCommit ends what beginCommit began: commitSeq even again (s.rev now
// matches what a new snapshot holds), and the readers waiting are woken.
func (s *Store) endCommit() {
	s.commitSeq.Add(1)
	close(*s.committed.Load())
}
