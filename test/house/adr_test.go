package house

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// adrDir holds the ADRs and their index (README.md), from this package's directory.
const adrDir = "../../docs/adr"

// adrFile is an ADR's file name: its number, a dash, its slug.
var adrFile = regexp.MustCompile(`^[0-9]{3}-[a-z0-9-]+\.md$`)

// adrStatusLines is how far under its title an ADR's Status line may start.
const adrStatusLines = 5

// TestADRsIndexedWithAStatus: every docs/adr/NNN-*.md is linked from
// docs/adr/README.md, every link there names an ADR that exists, and every
// ADR says its status (accepted, rejected, superseded in part by …) in a
// "Status:" line right under its title.
func TestADRsIndexedWithAStatus(t *testing.T) {
	entries, err := os.ReadDir(adrDir)
	if err != nil {
		t.Fatalf("read %s: %v", adrDir, err)
	}
	index, err := os.ReadFile(filepath.Join(adrDir, "README.md"))
	if err != nil {
		t.Fatalf("read the ADR index: %v", err)
	}
	adrs := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") || e.Name() == "README.md" {
			continue
		}
		name := e.Name()
		if !adrFile.MatchString(name) {
			t.Errorf("docs/adr/%s: name an ADR NNN-slug.md (three digits, lower-case slug)", name)
			continue
		}
		adrs[name] = true
		if !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/adr/%s is not in docs/adr/README.md: add its row (number and title as a link, one line, status)", name)
		}
		if !hasStatusLine(t, filepath.Join(adrDir, name)) {
			t.Errorf("docs/adr/%s has no \"Status: ...\" line within %d lines of its title: add one (accepted, rejected, or superseded [in part] by ADR NNN)", name, adrStatusLines)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(([^)]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		if !adrs[m[1]] {
			t.Errorf("docs/adr/README.md links %s, which is not an ADR in docs/adr: fix or drop the row", m[1])
		}
	}
}

func hasStatusLine(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; i <= adrStatusLines && sc.Scan(); i++ {
		if strings.HasPrefix(sc.Text(), "Status: ") {
			return true
		}
	}
	return false
}
