import json, datetime
import numpy as np
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import display


def show(name, fig, **expect):
    print('EXPECT ' + json.dumps(dict(expect, name=name)), flush=True)
    display(fig)
    plt.close(fig)


cats = ['north', 'south', 'east']
vals = [17, 42, 23]
x = list(range(10))
fig, ax = plt.subplots()
ax.plot(x, [v * v for v in x], label='squares')
ax.plot(x, [2 * v for v in x], label='doubles')
ax.set_title('Growth'); ax.set_xlabel('time (s)'); ax.set_ylabel('size [m]')
print('EXPECT ' + json.dumps({'name': 'line', 'x': x, 'y1': [v * v for v in x],
                              'y2': [2 * v for v in x]}), flush=True)
plt.show()

fig, ax = plt.subplots(); ax.bar(cats, vals); ax.set_title('Revenue by region')
ax.set_ylabel('USD (k)')
show('bar', fig, cats=cats, vals=vals)

fig, ax = plt.subplots(); ax.barh(cats, vals)
show('barh', fig, cats=cats, vals=vals)

df = pd.DataFrame({'2023': [1, 2, 3], '2024': [4, 5, 6]}, index=cats)
ax = df.plot.bar()
show('grouped', ax.figure, cats=cats, a=[1, 2, 3], b=[4, 5, 6])

fig, ax = plt.subplots(); ax.bar(cats, [1, 2, 3], label='a')
ax.bar(cats, [4, 5, 6], bottom=[1, 2, 3], label='b')
show('stacked', fig, cats=cats, a=[1, 2, 3], b=[4, 5, 6])

rng = np.random.default_rng(7)
sx, sy = rng.normal(size=50), rng.normal(size=50)
fig, ax = plt.subplots(); ax.scatter(sx, sy, label='pts')
show('scatter', fig, x=sx.tolist(), y=sy.tolist())

fig, ax = plt.subplots(); ax.pie([1, 2, 3], labels=['a', 'b', 'c'])
show('pie', fig, labels=['a', 'b', 'c'], fractions=[1 / 6, 2 / 6, 3 / 6])

d1, d2 = rng.normal(size=100).tolist() + [8.0], rng.normal(5, 2, size=100).tolist()
fig, ax = plt.subplots(); ax.boxplot([d1, d2], labels=['A', 'B'])
show('box', fig, data=[d1, d2], labels=['A', 'B'])

h = rng.normal(size=500)
fig, ax = plt.subplots(); ax.hist(h, bins=7)
counts, edges = np.histogram(h, bins=7)
show('hist', fig, counts=counts.tolist(), edges=edges.tolist())

fig, ax = plt.subplots()
sns.barplot(x=cats, y=vals, errorbar=None, ax=ax)
show('sns_bar', fig, cats=cats, vals=vals)

fig, ax = plt.subplots()
sns.scatterplot(x=sx, y=sy, ax=ax)
show('sns_scatter', fig, x=sx.tolist(), y=sy.tolist())

fig, ax = plt.subplots()
sns.boxplot(x=['A'] * 100 + ['B'] * 100, y=d1[:100] + d2, ax=ax)
show('sns_box', fig, data=[d1[:100], d2], labels=['A', 'B'])

fig, ax = plt.subplots(); ax.plot(x, x, color='r'); ax2 = ax.twinx()
ax2.plot(x, [-v for v in x], color='b'); ax2.set_ylabel('neg')
show('twin', fig, x=x, y1=x, y2=[-v for v in x])

fig, (a1, a2) = plt.subplots(2, 1); a1.plot(x, x); a2.bar(cats, vals)
show('subplots', fig, x=x, cats=cats, vals=vals)

fig, ax = plt.subplots(); ax.plot(x, [10 ** v for v in x]); ax.set_yscale('log')
show('log', fig, x=x, y=[10 ** v for v in x])

days = [datetime.datetime(2024, 1, 1) + datetime.timedelta(days=i) for i in range(5)]
fig, ax = plt.subplots(); ax.plot(days, vals + [5, 6])
show('date', fig, x=[d.isoformat() for d in days], y=vals + [5, 6])

fig = plt.figure()
show('empty', fig)

big = np.sin(np.arange(10000) / 100.0)
fig, ax = plt.subplots(); ax.plot(big)
show('line10k', fig, y=big.tolist())

bx, by = rng.normal(size=100000), rng.normal(size=100000)
fig, ax = plt.subplots(); ax.scatter(bx, by, s=1)
show('scatter100k', fig, first=[bx[0], by[0]], last=[bx[-1], by[-1]], n=100000)

s = pd.Series([3, 1, 4, 1, 5], index=pd.date_range('2024-03-01', periods=5, freq='D'))
print('EXPECT ' + json.dumps({'name': 'pandas_dates', 'y': [3, 1, 4, 1, 5],
                              'x': [d.isoformat() for d in s.index]}), flush=True)
s.plot(title='pandas dates')
