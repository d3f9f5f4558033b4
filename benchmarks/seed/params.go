package seed

import (
	"errors"
	"fmt"
	"time"
)

// Params is the shape of one experiment.
type Params struct {
	Procs      int           // worker processes (the seed's instances)
	Goroutines int           // parallel acquires per round in a process
	Attempts   int           // acquires per process, in rounds of Goroutines
	Name       string        // the lock name all attempts contend for
	Wait       time.Duration // wait budget of an acquire
	TTL        time.Duration // lock lifetime
	SpinMin    time.Duration // sleep between attempts: [SpinMin, SpinMin+SpinRandom)
	SpinRandom time.Duration
}

// SeedParams returns the seed's shape: 3 processes × 400 attempts on
// lock_key in rounds of 4 parallel acquires (1200 attempts in all), wait 3 s,
// TTL 10 s, sleep 10–20 ms.
func SeedParams() Params {
	return Params{
		Procs:      3,
		Goroutines: 4,
		Attempts:   400,
		Name:       "lock_key",
		Wait:       3 * time.Second,
		TTL:        10 * time.Second,
		SpinMin:    10 * time.Millisecond,
		SpinRandom: 10 * time.Millisecond,
	}
}

func (p Params) validate() error {
	if p.Procs < 1 || p.Goroutines < 1 || p.Attempts < 1 {
		return fmt.Errorf("seed: procs, goroutines and attempts must be at least 1 (got %d, %d, %d)", p.Procs, p.Goroutines, p.Attempts)
	}
	if p.Name == "" || p.Wait < 0 || p.TTL <= 0 || p.SpinMin < 0 || p.SpinRandom < 0 {
		return errors.New("seed: the name must not be empty, the TTL must be positive and no duration negative")
	}
	return nil
}
