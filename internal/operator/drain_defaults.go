package operator

import "time"

// drainRetryDelay is kubectl drain's default delay between eviction retries
// (a PodDisruptionBudget refusing an eviction).
const drainRetryDelay = 5 * time.Second
