package core

import "github.com/reqlock/reqlock/lockstore"

// The Store seam lives in package lockstore, which a store author reads;
// these names keep it reachable from core.
type (
	// Store keeps the locks of a Locker (see lockstore.Store).
	Store = lockstore.Store
	// Notifier pushes wake-ups at a release (see lockstore.Notifier).
	Notifier = lockstore.Notifier
	// Undoer removes locks in the background (see lockstore.Undoer).
	Undoer = lockstore.Undoer
	// TTLRounder holds locks longer than asked (see lockstore.TTLRounder).
	TTLRounder = lockstore.TTLRounder
	// FreeAcquirer shapes a first attempt for a free name (see
	// lockstore.FreeAcquirer).
	FreeAcquirer = lockstore.FreeAcquirer
	// HeldAcquirer shapes a later attempt for a held name, and tells shares
	// apart (see lockstore.HeldAcquirer).
	HeldAcquirer = lockstore.HeldAcquirer
	// Tuner takes the Locker's settings (see lockstore.Tuner).
	Tuner = lockstore.Tuner
	// Checker refuses settings a store cannot serve (see lockstore.Checker).
	Checker = lockstore.Checker
	// StoreSettings are the settings a Locker gives its store (see
	// lockstore.StoreSettings).
	StoreSettings = lockstore.StoreSettings
	// FenceRaiser raises a fence counter (see lockstore.FenceRaiser).
	FenceRaiser = lockstore.FenceRaiser
	// Queuer keeps waiters in line for WithFair (see lockstore.Queuer).
	Queuer = lockstore.Queuer
	// Waiter is a waiter's place in a queue (see lockstore.Waiter).
	Waiter = lockstore.Waiter
	// Grant is a Queuer's answer to a waiter (see lockstore.Grant).
	Grant = lockstore.Grant
)
