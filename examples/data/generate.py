#!/usr/bin/python3
"""Generate the finance demo's data: a 2026 operating-expense budget and the
actual general-ledger lines of its four quarters, for a ~450-person software
company. Deterministic (fixed seed, standard library only), so the committed
CSVs and the demo notebook always agree:

    /usr/bin/python3 examples/data/generate.py [OUTDIR]   # default: this dir

Files:
    budget_2026.csv          department, account, q1..q4 budget (USD)
    actuals_2026_q1.csv ...  one line per GL posting: date, department,
    actuals_2026_q4.csv      account, vendor, memo, amount_usd

Most lines track the budget within a few percent. A few real stories are
hidden in the postings (the memos tell them), for an analyst to find:
  - Engineering cloud costs spike in Q2-Q3: on-demand GPU instances for a
    fine-tuning project, until reserved instances are bought in August;
  - Marketing overspends in Q3: an unbudgeted Dreamforce sponsorship and a
    LinkedIn launch campaign on top of the planned paid media;
  - Engineering payroll runs under budget from Q2: hiring lags the plan;
  - G&A professional services jump in Q2: outside counsel for a contract
    dispute;
  - Sales commissions exceed budget in Q4: accelerators on three large deals.
"""
import csv
import os
import random
import sys

YEAR = 2026
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]

# Quarterly budget, USD: department -> account -> [Q1, Q2, Q3, Q4].
BUDGET = {
    "Sales": {
        "Salaries & Benefits": [1_450_000, 1_495_000, 1_540_000, 1_585_000],
        "Commissions": [380_000, 400_000, 420_000, 520_000],
        "Travel & Entertainment": [95_000, 95_000, 90_000, 110_000],
        "Software & Subscriptions": [60_000, 60_000, 62_000, 62_000],
        "Contractors": [40_000, 40_000, 40_000, 40_000],
    },
    "Marketing": {
        "Salaries & Benefits": [620_000, 630_000, 640_000, 650_000],
        "Paid Media": [400_000, 400_000, 450_000, 420_000],
        "Events & Sponsorships": [120_000, 60_000, 60_000, 80_000],
        "Content & Creative": [90_000, 90_000, 95_000, 90_000],
        "Software & Subscriptions": [55_000, 55_000, 55_000, 57_000],
        "Travel & Entertainment": [35_000, 30_000, 35_000, 30_000],
    },
    "Engineering": {
        "Salaries & Benefits": [2_300_000, 2_420_000, 2_540_000, 2_600_000],
        "Cloud Infrastructure": [310_000, 325_000, 340_000, 355_000],
        "Software & Subscriptions": [120_000, 120_000, 125_000, 125_000],
        "Contractors": [150_000, 150_000, 120_000, 100_000],
        "Travel & Entertainment": [25_000, 25_000, 30_000, 25_000],
    },
    "Customer Success": {
        "Salaries & Benefits": [540_000, 555_000, 570_000, 585_000],
        "Software & Subscriptions": [45_000, 45_000, 45_000, 48_000],
        "Travel & Entertainment": [20_000, 20_000, 25_000, 20_000],
        "Training": [15_000, 12_000, 12_000, 15_000],
    },
    "G&A": {
        "Salaries & Benefits": [700_000, 710_000, 720_000, 730_000],
        "Professional Services": [210_000, 150_000, 150_000, 160_000],
        "Rent & Facilities": [420_000, 420_000, 420_000, 420_000],
        "Insurance": [90_000, 90_000, 90_000, 90_000],
        "Software & Subscriptions": [70_000, 70_000, 72_000, 72_000],
    },
}

# The usual vendor and memo for routine postings of each account.
ROUTINE = {
    "Salaries & Benefits": ("Gusto Payroll", "Payroll {mon} {year}"),
    "Commissions": ("Gusto Payroll", "Sales commissions {mon} {year}"),
    "Travel & Entertainment": ("Navan", "Travel and meals {mon} {year}"),
    "Software & Subscriptions": ("Various SaaS", "Subscriptions {mon} {year}"),
    "Contractors": ("Deel", "Contractor invoices {mon} {year}"),
    "Paid Media": ("Google Ads", "Search campaigns {mon} {year}"),
    "Events & Sponsorships": ("Cvent", "Field events {mon} {year}"),
    "Content & Creative": ("Northbeam Creative", "Content retainer {mon} {year}"),
    "Cloud Infrastructure": ("Amazon Web Services",
                             "AWS usage {mon} {year} (production)"),
    "Training": ("Coursera for Business", "Training {mon} {year}"),
    "Professional Services": ("Baker Tilly", "Accounting & audit {mon} {year}"),
    "Rent & Facilities": ("Hudson Pacific", "Office lease {mon} {year}"),
    "Insurance": ("Marsh", "Insurance premiums {mon} {year}"),
}

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
MONTH_END = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
# Share of a quarter's budget falling in each of its months.
SPLIT = [0.33, 0.33, 0.34]

# Engineering headcount: plan vs actual by month (payroll scales with it).
ENG_PLAN_FTE = [58, 58, 58, 61, 61, 61, 64, 64, 64, 66, 66, 66]
ENG_ACTUAL_FTE = [58, 58, 58, 58, 57, 58, 59, 60, 60, 63, 64, 65]


def posting_date(month, day):
    return "%d-%02d-%02d" % (YEAR, month + 1, day)


def generate(outdir):
    rng = random.Random(YEAR)
    with open(os.path.join(outdir, "budget_2026.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["department", "account", "q1_budget", "q2_budget",
                    "q3_budget", "q4_budget"])
        for dept, accounts in BUDGET.items():
            for account, q in accounts.items():
                w.writerow([dept, account] + q)

    lines = {q: [] for q in QUARTERS}

    def post(month, day, dept, account, vendor, memo, amount):
        lines[QUARTERS[month // 3]].append(
            [posting_date(month, day), dept, account, vendor, memo,
             "%.2f" % amount])

    for month in range(12):
        qi, mi = month // 3, month % 3
        mon = MONTHS[month]
        for dept, accounts in BUDGET.items():
            for account, q in accounts.items():
                base = q[qi] * SPLIT[mi]
                vendor, memo = ROUTINE[account]
                memo = memo.format(mon=mon, year=YEAR)
                noise = 1 + rng.uniform(-0.035, 0.035)
                amount = base * noise
                if dept == "Engineering" and account == "Salaries & Benefits":
                    amount = base * ENG_ACTUAL_FTE[month] / ENG_PLAN_FTE[month]
                    amount *= 1 + rng.uniform(-0.006, 0.006)
                    memo += " (%d FTE; plan %d)" % (ENG_ACTUAL_FTE[month],
                                                    ENG_PLAN_FTE[month])
                if account in ("Travel & Entertainment", "Paid Media",
                               "Software & Subscriptions", "Contractors"):
                    # Several postings a month, like real card and AP feeds.
                    parts = [rng.uniform(0.6, 1.4) for _ in range(3)]
                    total = sum(parts)
                    days = sorted(rng.sample(range(3, MONTH_END[month] - 1), 3))
                    for p, d in zip(parts, days):
                        post(month, d, dept, account, vendor, memo,
                             amount * p / total)
                else:
                    post(month, MONTH_END[month], dept, account, vendor, memo,
                         amount)

    # Engineering cloud: on-demand GPU instances for a fine-tuning project
    # (Apr-Aug), then 1-year reserved instances bring the bill down.
    gpu = {3: 21_000, 4: 58_000, 5: 71_000, 6: 64_000, 7: 30_000}
    for month, amount in gpu.items():
        post(month, MONTH_END[month], "Engineering", "Cloud Infrastructure",
             "Amazon Web Services",
             "EC2 p4d.24xlarge on-demand - LLM fine-tuning project "
             "(untagged, not in plan)", amount)
    post(7, 18, "Engineering", "Cloud Infrastructure", "Amazon Web Services",
         "Reserved Instances 1-yr, partial upfront (approved by CFO)", 48_000)
    for month in (8, 9, 10, 11):
        post(month, MONTH_END[month], "Engineering", "Cloud Infrastructure",
             "Amazon Web Services",
             "RI savings credit vs on-demand rates", -19_500)

    # Marketing Q3: an unbudgeted Dreamforce sponsorship and a launch
    # campaign on LinkedIn on top of the planned paid media.
    post(8, 9, "Marketing", "Events & Sponsorships", "Salesforce Events",
         "Dreamforce 2026 - Gold sponsorship + booth (not in plan)", 162_000)
    post(8, 20, "Marketing", "Events & Sponsorships", "Freeman",
         "Dreamforce booth build, freight and staffing", 38_500)
    post(8, 24, "Marketing", "Travel & Entertainment", "Navan",
         "Dreamforce team travel (14 people)", 27_800)
    for month, amount in ((7, 64_000), (8, 71_500)):
        post(month, 28, "Marketing", "Paid Media", "LinkedIn Ads",
             "v3 launch campaign - LinkedIn sponsored content", amount)

    # G&A Q2: outside counsel for a customer contract dispute.
    for month, amount in ((4, 38_000), (5, 61_000), (6, 14_500)):
        post(month, 25, "G&A", "Professional Services",
             "Kessler & Hart LLP",
             "Outside counsel - Halvorsen contract dispute", amount)

    # Sales Q4: commission accelerators on three large deals.
    post(11, 31, "Sales", "Commissions", "Gusto Payroll",
         "Q4 accelerators - 3 deals over $1M ARR (Acme, Borealis, Cinder)",
         132_000)

    header = ["date", "department", "account", "vendor", "memo",
              "amount_usd"]
    for q in QUARTERS:
        rows = sorted(lines[q], key=lambda r: (r[0], r[1], r[2], r[3]))
        path = os.path.join(outdir, "actuals_2026_%s.csv" % q.lower())
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    generate(out)
