// Package claimstest holds the fixtures shared by the tests of what reads
// prepared claims on the node (the monitor, the host pid mapper): a claim
// source a test changes, a prepared claim on one GPU, and its region file.
package claimstest
