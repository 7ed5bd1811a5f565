"""The jail a site's code runs in and how its process is made (limits, environment, the compile's load check):
what both the content compile and the code tools need, so neither folder reaches into the other for it."""
