package server

// undo collects cleanup steps for a multi-step create; Run runs them in reverse unless Keep was called.
type undo struct {
	steps []func()
	keep  bool
}

func (u *undo) Add(f func()) { u.steps = append(u.steps, f) }
func (u *undo) Keep()        { u.keep = true }
func (u *undo) Run() {
	if u.keep {
		return
	}
	for i := len(u.steps) - 1; i >= 0; i-- {
		u.steps[i]()
	}
}
