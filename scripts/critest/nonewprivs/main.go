// Command nonewprivs is the stand-in for registry.k8s.io/e2e-test-images/nonewprivs: a
// setuid-root binary that prints its effective uid, so critest can tell whether
// no_new_privs stopped the setuid bit from taking effect.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
