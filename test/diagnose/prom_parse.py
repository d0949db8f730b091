#!/usr/bin/env python3
"""Parses a Prometheus text file with prometheus_client and prints each family's sample count.

usage: prom_parse.py FILE   (exit 1 when the text does not parse or a family lacks its TYPE)
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1]).read()
    for fam in text_string_to_metric_families(text):
        if fam.type != "gauge":
            sys.exit(f"{fam.name}: type {fam.type}, expected gauge")
        print(fam.name, len(fam.samples))


if __name__ == "__main__":
    main()
