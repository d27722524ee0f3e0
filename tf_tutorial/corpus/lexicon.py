"""第 10 章：玩具翻译任务的词典（英文词 → 中文词，一词一义；old、short 按名词选词）。

Each entry gives one English word (or fixed phrase) and the one Chinese word it translates to,
so that every sentence the grammar in ``grammar.py`` builds has exactly one translation. The one
exception, ``ANIMATE_ADJECTIVES``, is still one translation: the noun decides it.

Noun lines:  ``english[/plural] 中文 量词 class [m|p]``; classes: P person, A animal, R something
to read, F food, D drink, V vehicle one drives (开), W vehicle one rides (骑), T thing, B building
or place (在 …), C city or country. ``m`` marks a mass noun (rice: never "a rice" or "three
rices"), ``p`` a noun used only in the plural (scissors, noodles); neither is counted with a or
a number.
Verb lines:  ``base past 中文 subjects objects [s|a]``; ``s`` marks a stative verb (爱, 喜欢),
which takes no 了 and no progressive; ``a`` marks a verb of a moment (看见, 找到: the act is over
as it happens), which takes 了 but no progressive (正在 看见 is not Chinese).
"""
from __future__ import annotations

NOUNS = """
teacher 老师 个 P|student 学生 个 P|doctor 医生 个 P|nurse 护士 个 P|farmer 农民 个 P
driver 司机 个 P|cook 厨师 个 P|worker 工人 个 P|writer 作家 个 P|singer 歌手 个 P
painter 画家 个 P|lawyer 律师 个 P|police_officer 警察 个 P|soldier 士兵 个 P|pilot 飞行员 个 P
engineer 工程师 个 P|scientist 科学家 个 P|artist 艺术家 个 P|actor 演员 个 P|reporter 记者 个 P
manager 经理 个 P|boss 老板 个 P|secretary 秘书 个 P|waiter 服务员 个 P|child/children 孩子 个 P
man/men 人 个 P|woman/women 女人 个 P|boy 男孩 个 P|girl 女孩 个 P|baby/babies 婴儿 个 P
friend 朋友 个 P|neighbour 邻居 个 P|classmate 同学 个 P|colleague 同事 个 P|stranger 陌生人 个 P
tourist 游客 个 P|customer 顾客 个 P|guest 客人 个 P|patient 病人 个 P|player 球员 个 P
librarian 图书管理员 个 P|professor 教授 个 P|musician 音乐家 个 P|dancer 舞蹈家 个 P|poet 诗人 个 P
king 国王 个 P|queen 女王 个 P|prince 王子 个 P|princess/princesses 公主 个 P|thief/thieves 小偷 个 P
mother 母亲 个 P|father 父亲 个 P|sister 姐姐 个 P|brother 哥哥 个 P|grandmother 奶奶 个 P
grandfather 爷爷 个 P|uncle 叔叔 个 P|aunt 阿姨 个 P|cousin 表哥 个 P|son 儿子 个 P
daughter 女儿 个 P|husband 丈夫 个 P|wife/wives 妻子 个 P|programmer 程序员 个 P|chemist 化学家 个 P
dog 狗 只 A|cat 猫 只 A|bird 鸟 只 A|mouse/mice 老鼠 只 A|rabbit 兔子 只 A|tiger 老虎 只 A
lion 狮子 只 A|monkey 猴子 只 A|panda 熊猫 只 A|bear 熊 只 A|wolf/wolves 狼 只 A|fox 狐狸 只 A
duck 鸭子 只 A|chicken 鸡 只 A|sheep/sheep 羊 只 A|pig 猪 只 A|frog 青蛙 只 A|owl 猫头鹰 只 A
parrot 鹦鹉 只 A|eagle 老鹰 只 A|elephant 大象 头 A|cow 奶牛 头 A|horse 马 匹 A|fish/fish 鱼 条 A
snake 蛇 条 A|deer/deer 鹿 只 A|goat 山羊 只 A|camel 骆驼 头 A|kangaroo 袋鼠 只 A|zebra 斑马 匹 A
giraffe 长颈鹿 只 A|squirrel 松鼠 只 A|turtle 乌龟 只 A|whale 鲸鱼 头 A|dolphin 海豚 只 A|goose/geese 鹅 只 A
penguin 企鹅 只 A|butterfly/butterflies 蝴蝶 只 A|bee 蜜蜂 只 A|spider 蜘蛛 只 A|ant 蚂蚁 只 A|crab 螃蟹 只 A
book 书 本 R|magazine 杂志 本 R|dictionary/dictionaries 词典 本 R|novel 小说 本 R|notebook 笔记本 本 R
textbook 课本 本 R|diary/diaries 日记 本 R|album 相册 本 R|newspaper 报纸 份 R|report 报告 份 R
letter 信 封 R|email 邮件 封 R|poem 诗 首 R|story/stories 故事 个 R|map 地图 张 R|menu 菜单 份 R
article 文章 篇 R|paper 论文 篇 R|essay 散文 篇 R|contract 合同 份 R|manual 说明书 本 R|comic 漫画 本 R
apple 苹果 个 F|orange 橙子 个 F|banana 香蕉 根 F|pear 梨 个 F|peach/peaches 桃子 个 F|egg 鸡蛋 个 F
cake 蛋糕 块 F|bread 面包 块 F m|cookie 饼干 块 F|sandwich/sandwiches 三明治 个 F|pizza 披萨 个 F
hamburger 汉堡 个 F|dumpling 饺子 个 F|noodles/noodles 面条 碗 F p|potato/potatoes 土豆 个 F|tomato/tomatoes 西红柿 个 F
carrot 胡萝卜 根 F|watermelon 西瓜 个 F|lemon 柠檬 个 F|mango/mangoes 芒果 个 F|grape 葡萄 颗 F
strawberry/strawberries 草莓 颗 F|candy/candies 糖果 颗 F|pie 馅饼 块 F|steak 牛排 块 F|salad 沙拉 份 F
tea 茶 杯 D|coffee 咖啡 杯 D|milk 牛奶 杯 D|juice 果汁 杯 D|beer 啤酒 瓶 D|wine 葡萄酒 瓶 D
water 水 杯 D|soup 汤 碗 D|cola 可乐 瓶 D|yogurt 酸奶 瓶 D
car 汽车 辆 V|bus/buses 公共汽车 辆 V|truck 卡车 辆 V|taxi 出租车 辆 V|tractor 拖拉机 辆 V|van 面包车 辆 V
jeep 吉普车 辆 V|ambulance 救护车 辆 V|boat 船 条 V|train 火车 列 V|plane 飞机 架 V
bicycle 自行车 辆 W|motorbike 摩托车 辆 W|scooter 滑板车 辆 W|tricycle 三轮车 辆 W
pen 钢笔 支 T|pencil 铅笔 支 T|brush/brushes 刷子 把 T|chair 椅子 把 T|umbrella 雨伞 把 T|knife/knives 刀 把 T
key 钥匙 把 T|spoon 勺子 把 T|table 桌子 张 T|bed 床 张 T|photo 照片 张 T|ticket 票 张 T
picture 图画 幅 T|painting 油画 幅 T|computer 电脑 台 T|television 电视 台 T|camera 相机 台 T|printer 打印机 台 T
phone 手机 部 T|movie 电影 部 T|song 歌 首 T|shirt 衬衫 件 T|coat 外套 件 T|sweater 毛衣 件 T
dress/dresses 裙子 条 T|skirt 短裙 条 T|scarf/scarves 围巾 条 T|tie 领带 条 T|shoe 鞋 只 T
sock 袜子 只 T|glove 手套 只 T|hat 帽子 顶 T|watch/watches 手表 块 T|box/boxes 盒子 个 T
bag 包 个 T|cup 杯子 个 T|bowl 碗 个 T|plate 盘子 个 T|bottle 瓶子 个 T|basket 篮子 个 T
ball 球 个 T|toy 玩具 个 T|doll 娃娃 个 T|kite 风筝 只 T|guitar 吉他 把 T|violin 小提琴 把 T
piano 钢琴 架 T|drum 鼓 面 T|clock 钟 座 T|lamp 台灯 盏 T|mirror 镜子 面 T|flag 旗子 面 T
wallet 钱包 个 T|ring 戒指 枚 T|necklace 项链 条 T|gift 礼物 件 T|sofa 沙发 张 T|desk 书桌 张 T
flower 花 朵 T|tree 树 棵 T|stone 石头 块 T|candle 蜡烛 根 T|rope 绳子 根 T|needle 针 根 T
envelope 信封 个 T|stamp 邮票 张 T|coin 硬币 枚 T|card 卡片 张 T|vase 花瓶 个 T|pillow 枕头 个 T
blanket 毯子 条 T|towel 毛巾 条 T|backpack 背包 个 T|suitcase 行李箱 个 T|laptop 笔记本电脑 台 T|robot 机器人 个 T
library/libraries 图书馆 座 B|school 学校 所 B|hospital 医院 家 B|restaurant 餐厅 家 B|hotel 酒店 家 B
bank 银行 家 B|shop 商店 家 B|supermarket 超市 家 B|bookstore 书店 家 B|cinema 电影院 家 B
museum 博物馆 座 B|park 公园 座 B|station 车站 座 B|airport 机场 座 B|office 办公室 间 B
factory/factories 工厂 家 B|farm 农场 个 B|market 市场 个 B|zoo 动物园 座 B|garden 花园 个 B
kitchen 厨房 间 B|classroom 教室 间 B|gym 体育馆 座 B|church 教堂 座 B|temple 寺庙 座 B
theatre 剧院 座 B|cafe 咖啡馆 家 B|bakery/bakeries 面包店 家 B|pharmacy/pharmacies 药店 家 B|post_office 邮局 家 B
university/universities 大学 所 B|laboratory/laboratories 实验室 间 B|beach/beaches 海滩 片 B|village 村庄 个 B
judge 法官 个 P|architect 建筑师 个 P|dentist 牙医 个 P|barber 理发师 个 P|fisherman/fishermen 渔民 个 P
hunter 猎人 个 P|sailor 水手 个 P|astronaut 宇航员 个 P|detective 侦探 个 P|mayor 市长 个 P
guard 保安 个 P|postman/postmen 邮递员 个 P|gardener 园丁 个 P|tailor 裁缝 个 P|baker 面包师 个 P
photographer 摄影师 个 P|editor 编辑 个 P|translator 翻译家 个 P|coach/coaches 教练 个 P|volunteer 志愿者 个 P
shark 鲨鱼 条 A|octopus/octopuses 章鱼 只 A|swan 天鹅 只 A|pigeon 鸽子 只 A|crow 乌鸦 只 A|bat 蝙蝠 只 A
hedgehog 刺猬 只 A|peacock 孔雀 只 A|lizard 蜥蜴 只 A|crocodile 鳄鱼 条 A|leopard 豹子 只 A|donkey 驴 头 A
puppy/puppies 小狗 只 A|kitten 小猫 只 A|hamster 仓鼠 只 A|koala 考拉 只 A|seal 海豹 只 A|beetle 甲虫 只 A
brochure 小册子 本 R|catalogue 目录 本 R|biography/biographies 传记 本 R|guidebook 指南 本 R|cookbook 食谱 本 R
postcard 明信片 张 R|invitation 请柬 张 R|receipt 收据 张 R|poster 海报 张 R|script 剧本 个 R|thesis/theses 学位论文 篇 R
rice 米饭 碗 F m|porridge 粥 碗 F m|tofu 豆腐 块 F m|cheese 奶酪 块 F|sausage 香肠 根 F|pancake 煎饼 张 F
mooncake 月饼 块 F|bun 包子 个 F|cucumber 黄瓜 根 F|onion 洋葱 个 F|pumpkin 南瓜 个 F|pineapple 菠萝 个 F
cherry/cherries 樱桃 颗 F|walnut 核桃 颗 F|peanut 花生 颗 F|chocolate 巧克力 块 F|ice_cream 冰淇淋 个 F|doughnut 甜甜圈 个 F
lemonade 柠檬水 杯 D|smoothie 奶昔 杯 D|cocoa 可可 杯 D|whisky/whiskies 威士忌 瓶 D|soda 苏打水 瓶 D
helicopter 直升机 架 V|ship 轮船 艘 V|submarine 潜艇 艘 V|rocket 火箭 枚 V|yacht 游艇 艘 V|tram 电车 辆 V
skateboard 滑板 块 W|unicycle 独轮车 辆 W
hammer 锤子 把 T|blade 刀片 片 T|ladder 梯子 架 T|shovel 铁锹 把 T|bucket 水桶 个 T|fan 扇子 把 T
pot 锅 口 T|kettle 水壶 个 T|teapot 茶壶 个 T|jar 罐子 个 T|tent 帐篷 顶 T|sail 帆 面 T
telescope 望远镜 台 T|microscope 显微镜 台 T|radio 收音机 台 T|fridge 冰箱 台 T|oven 烤箱 台 T|heater 暖气片 片 T
tablet 平板电脑 台 T|keyboard 键盘 个 T|screen 屏幕 块 T|battery/batteries 电池 节 T|bulb 灯泡 个 T|cable 电缆 根 T
jacket 夹克 件 T|uniform 制服 件 T|vest 背心 件 T|belt 皮带 条 T|boot 靴子 只 T|slipper 拖鞋 只 T
earring 耳环 只 T|bracelet 手镯 只 T|crown 王冠 顶 T|helmet 头盔 顶 T|mask 面具 个 T|medal 奖牌 枚 T
trophy/trophies 奖杯 座 T|statue 雕像 座 T|fountain 喷泉 座 T|carpet 地毯 块 T|curtain 窗帘 幅 T|cushion 靠垫 个 T
sculpture 雕塑 件 T|floor_lamp 落地灯 盏 T|puzzle 拼图 幅 T|chessboard 棋盘 张 T|balloon 气球 个 T|lantern 灯笼 盏 T
stapler 订书机 个 T|scissors/scissors 剪刀 把 T p|ruler 尺子 把 T|eraser 橡皮 块 T|folder 文件夹 个 T|calendar 日历 本 T
compass/compasses 指南针 个 T|whistle 哨子 个 T|rake 耙子 把 T|axe 斧头 把 T|anchor 锚 只 T|wheel 轮子 个 T
sofa_bed 沙发床 张 T|wardrobe 衣柜 个 T|shelf/shelves 书架 个 T|drawer 抽屉 个 T|cabinet 柜子 个 T|stool 凳子 把 T
piglet 小猪 只 A|lamb 小羊 只 A|calf/calves 小牛 头 A|chick 小鸡 只 A|duckling 小鸭 只 A|foal 小马 匹 A
plum 李子 个 F|apricot 杏 个 F|coconut 椰子 个 F|lychee 荔枝 颗 F|kiwi 猕猴桃 个 F|melon 甜瓜 个 F
banker 银行家 个 P|merchant 商人 个 P|clerk 职员 个 P|cashier 收银员 个 P|plumber 水管工 个 P|mechanic 机械师 个 P
castle 城堡 座 B|palace 宫殿 座 B|tower 塔 座 B|prison 监狱 座 B|embassy/embassies 大使馆 座 B|harbour 港口 个 B
lake 湖 个 B|forest 森林 片 B|desert 沙漠 片 B|valley/valleys 山谷 个 B|cave 山洞 个 B|studio 工作室 间 B
bar 酒吧 家 B|clinic 诊所 家 B|barbershop 理发店 家 B|gallery/galleries 画廊 家 B|kindergarten 幼儿园 所 B|warehouse 仓库 座 B
square 广场 个 B|stadium 体育场 座 B|swimming_pool 游泳池 个 B|bridge 桥 座 B|mountain 山 座 B|island 岛 座 B
"""

PLACES = """
China 中国|Japan 日本|France 法国|Germany 德国|Italy 意大利|Spain 西班牙|Russia 俄罗斯|India 印度
Brazil 巴西|Canada 加拿大|Mexico 墨西哥|Egypt 埃及|Korea 韩国|Australia 澳大利亚|England 英国|America 美国
Beijing 北京|Shanghai 上海|Guangzhou 广州|Shenzhen 深圳|Chengdu 成都|Wuhan 武汉|Xian 西安|Nanjing 南京
Hangzhou 杭州|Tianjin 天津|Chongqing 重庆|Suzhou 苏州|Qingdao 青岛|Kunming 昆明|Harbin 哈尔滨|Lhasa 拉萨
Xiamen 厦门|Dalian 大连|Changsha 长沙|Fuzhou 福州|Lanzhou 兰州|Urumqi 乌鲁木齐|Hefei 合肥|Jinan 济南
Tokyo 东京|Seoul 首尔|Paris 巴黎|London 伦敦|Berlin 柏林|Rome 罗马|Madrid 马德里|Moscow 莫斯科
Cairo 开罗|Sydney 悉尼|Toronto 多伦多|Chicago 芝加哥|Boston 波士顿|Vienna 维也纳|Prague 布拉格|Athens 雅典
Toulouse 图卢兹|Munich 慕尼黑|Milan 米兰|Barcelona 巴塞罗那|Hamburg 汉堡市|Zurich 苏黎世|Brussels 布鲁塞尔|Amsterdam 阿姆斯特丹
Stockholm 斯德哥尔摩|Helsinki 赫尔辛基|Warsaw 华沙|Budapest 布达佩斯|Nairobi 内罗毕|Lima 利马|Havana 哈瓦那|Manila 马尼拉
Jakarta 雅加达|Hanoi 河内|Delhi 德里|Mumbai 孟买|Dubai 迪拜|Tehran 德黑兰|Osaka 大阪|Kyoto 京都
Vietnam 越南|Thailand 泰国|Greece 希腊|Sweden 瑞典|Norway 挪威|Finland 芬兰|Poland 波兰|Kenya 肯尼亚
Peru 秘鲁|Chile 智利|Argentina 阿根廷|Nigeria 尼日利亚|Turkey 土耳其|Ireland 爱尔兰|Portugal 葡萄牙|Austria 奥地利
Dublin 都柏林|Oslo 奥斯陆|Lisbon 里斯本|Bangkok 曼谷|Singapore 新加坡|Istanbul 伊斯坦布尔|Venice 威尼斯|Geneva 日内瓦
"""

# People's names: English given names and Chinese surnames (Mr Wang → 王 先生).
GIVEN_NAMES = """
Tom 汤姆|Mary 玛丽|John 约翰|Alice 爱丽丝|Peter 彼得|Lucy 露西|David 大卫|Emma 艾玛|Jack 杰克|Anna 安娜
Michael 迈克尔|Linda 琳达|James 詹姆斯|Susan 苏珊|Robert 罗伯特|Sarah 莎拉|Kevin 凯文|Emily 艾米丽|Daniel 丹尼尔|Grace 格蕾丝
Oscar 奥斯卡|Chloe 克洛伊|Victor 维克多|Nina 妮娜|Simon 西蒙|Rose 罗丝|Adam 亚当|Eva 伊娃|Brian 布莱恩|Kate 凯特
Leo 利奥|Amy 艾米|Max 马克斯|Zoe 佐伊|Ryan 瑞恩|Ella 艾拉|Sam 山姆|Ruby 鲁比|Felix 菲利克斯|Iris 艾莉丝
Henry 亨利|Sophia 索菲亚|Frank 弗兰克|Olivia 奥利维亚|George 乔治|Julia 朱莉娅|Paul 保罗|Helen 海伦|Mark 马克|Laura 劳拉
"""
SURNAMES = """
Wang 王|Li 李|Zhang 张|Liu 刘|Chen 陈|Yang 杨|Zhao 赵|Huang 黄|Zhou 周|Wu 吴
Xu 徐|Sun 孙|Hu 胡|Zhu 朱|Gao 高|Lin 林|He 何|Guo 郭|Ma 马|Luo 罗
Liang 梁|Song 宋|Zheng 郑|Xie 谢|Han 韩|Tang 唐|Feng 冯|Yu 于|Dong 董|Xiao 萧
Cheng 程|Cao 曹|Yuan 袁|Deng 邓|Fu 傅|Shen 沈|Zeng 曾|Peng 彭|Lu 陆|Su 苏
Qian 钱|Kong 孔|Bai 白|Cui 崔|Kang 康|Mao 毛|Qiu 邱|Qin 秦|Jiang 江|Shi 石
Gu 顾|Hou 侯|Shao 邵|Meng 孟|Long 龙|Wan 万|Duan 段|Lei 雷|Tan 谭
Chiang 蒋|Cai 蔡|Jia 贾|Ding 丁|Wei 魏|Xue 薛|Ye 叶|Yan 阎|Pan 潘|Du 杜
"""
TITLES = "Mr 先生|Ms 女士|Dr 博士|Professor 教授"

# What a book, a lecture or a film can be "about" (一 本 关于 量子 物理 的 书).
TOPICS = """
quantum physics|量子 物理;ancient history|古代 历史;modern art|现代 艺术;Chinese history|中国 历史
world history|世界 历史;classical music|古典 音乐;modern music|现代 音乐;organic chemistry|有机 化学
molecular biology|分子 生物学;computer science|计算机 科学;political economy|政治 经济学;machine learning|机器 学习
ancient philosophy|古代 哲学;modern philosophy|现代 哲学;space travel|太空 旅行;climate change|气候 变化
marine biology|海洋 生物学;applied mathematics|应用 数学;pure mathematics|纯 数学;Greek mythology|希腊 神话
Chinese cooking|中国 烹饪;French cooking|法国 烹饪;traditional medicine|传统 医学;modern medicine|现代 医学
European literature|欧洲 文学;Chinese poetry|中国 诗歌;urban planning|城市 规划;animal behaviour|动物 行为
Roman law|罗马 法律;Japanese gardens|日本 园林;Indian cinema|印度 电影;Arctic exploration|北极 探险
volcanic rocks|火山 岩石;desert plants|沙漠 植物;medieval castles|中世纪 城堡;renaissance painting|文艺复兴 绘画
probability theory|概率 论;number theory|数 论;string theory|弦 论;game theory|博弈 论
plant genetics|植物 遗传学;ocean science|海洋 科学;solar energy|太阳 能源;nuclear energy|核 能源
wild birds|野生 鸟类;tropical fish|热带 鱼类;old trains|老式 火车;African wildlife|非洲 野生动物
"""

VERBS = """
read read 读 P R|write wrote 写 P R|buy bought 买 P RFDVWT|borrow borrowed 借 P RVWT
sell sold 卖 P RFDVWTA|lose lost 丢 P RVWT a|find found 找到 PA RVWTFA a|see saw 看见 PA PARVWTBFD a
eat ate 吃 PA F|drink drank 喝 PA D|drive drove 开 P V|ride rode 骑 P W
bite bit 咬 A PA|chase chased 追 PA PAW|like liked 喜欢 PA PARVWTFDC s|love loved 爱 P PAC s
hate hated 讨厌 PA PARFDT s|need needed 需要 P RVWTFD s|want wanted 想要 P RVWTFDA s|know knew 认识 P P s
visit visited 参观 P BC|clean cleaned 打扫 P B|wash washed 洗 P VWT|repair repaired 修理 P VWT
cook cooked 做 P F|help helped 帮助 PA P|meet met 遇见 PA PA a|teach taught 教 P P
feed fed 喂 P A|catch caught 抓住 PA A a|carry carried 搬 PA T|open opened 打开 P RT
send sent 寄 P RT|receive received 收到 P RT a|order ordered 点 P FD|prepare prepared 准备 P FD
forget forgot 忘记 P RT a|remember remembered 记得 P PRT s|choose chose 选择 P RVWTFD|steal stole 偷 P RVWTF
draw drew 画 P PAVWTB|photograph photographed 拍摄 P PAVWTB|follow followed 跟踪 PA PA|watch watched 观看 P A
miss missed 想念 P PAC s|own owned 拥有 P RVWTAB s|protect protected 保护 PA PA
paint painted 粉刷 P BT|hide hid 藏 PA RVWTF|throw threw 扔 PA T
bring brought 带来 PA RFDTA|keep kept 保留 P RVWTA|break broke 打破 PA T a|build built 建造 P B
design designed 设计 P BTVW|admire admired 欣赏 P PABT s|describe described 描述 P PABTC
introduce introduced 介绍 P PRC|rescue rescued 救 PA PA|wake woke 叫醒 PA PA|fix fixed 修 P T
pack packed 打包 P T|deliver delivered 递送 P RFDT|collect collected 收集 P RT|measure measured 测量 P T
destroy destroyed 摧毁 PA BTVW|examine examined 检验 P PA|ignore ignored 忽视 PA PA|praise praised 表扬 P P|print printed 打印 P R|translate translated 翻译 P R|check checked 检查 P RVWTB
"""
# Verbs without an object, and where their place phrase goes in Chinese.
INTRANSITIVE = """
work worked 工作 P|sleep slept 睡觉 PA|swim swam 游泳 PA|sing sang 唱歌 P|dance danced 跳舞 P
study studied 学习 P|run ran 跑步 PA|cry cried 哭 P|rest rested 休息 PA|wait waited 等待 P
play played 玩 PA|shout shouted 大喊 P|laugh laughed 笑 P
"""

# Adjectives: english comparative 中文 [b|c]; b = a bare adjective (大 狗), otherwise 中文 的 (红色 的 车);
# c = a colour: as a predicate it reads 是 红色 的 (车 是 红色 的), never 很 红色.
ADJECTIVES = """
big bigger 大 b|small smaller 小 b|old older 旧 b|new newer 新 b|young younger 年轻|tall taller 高 b
short shorter 短 b|fast faster 快 b|slow slower 慢 b|heavy heavier 重 b|light lighter 轻 b
cheap cheaper 便宜|long longer 长 b|clean cleaner 干净|strong stronger 强壮|happy happier 快乐
red - 红色 c|blue - 蓝色 c|green - 绿色 c|yellow - 黄色 c|white - 白色 c|black - 黑色 c|brown - 棕色 c|grey - 灰色 c
beautiful - 漂亮|interesting - 有趣|famous - 著名|expensive - 昂贵|strange - 奇怪|lovely - 可爱
dirty - 肮脏|shabby - 破旧|useful - 有用|boring - 无聊|quiet - 安静|friendly - 友好|clever - 聪明
soft - 柔软|hard - 坚硬|dark - 黑暗|bright - 明亮|warm - 温暖|cold - 寒冷|wet - 潮湿
dry - 干燥|simple - 简单|difficult - 困难|dangerous - 危险|safe - 安全|healthy - 健康|rich - 富有|poor - 贫穷
wise - 睿智|brave - 勇敢|shy - 害羞|proud - 骄傲|polite - 礼貌|honest - 诚实|noisy - 吵闹|golden - 金色 c
lazy - 懒惰|angry - 生气|hungry - 饥饿|sleepy - 困倦|busy - 忙碌|rare - 稀有|modern - 现代化
"""

# Adjectives whose Chinese depends on the noun: for a person or an animal (class P or A) the
# word here (老 国王, 矮 男孩), for anything else the lexicon's own (旧 汽车, 短 绳子).
ANIMATE_ADJECTIVES = "old 老|short 矮"

# Places that Chinese does not name bare after 在: English preposition and the Chinese word that
# follows the noun (at the lake → 在 湖 边, on the island → 在 岛 上, in the forest → 在 森林 里).
# Every other place is "at" (a city "in") and takes nothing after it: at the library → 在 图书馆.
PLACE_WORDS = """
lake at 边|forest in 里|desert in 里|valley in 里|cave in 里|mountain on 上|island on 上
beach on 上|bridge on 上|square in 上
"""

# Time phrases, with the tenses they go with: p past, n present (habit), f future.
TIMES = """
yesterday|昨天|p;yesterday morning|昨天 早上|p;yesterday evening|昨天 晚上|p;last week|上 周|p
last month|上 个 月|p;last year|去年|p;last night|昨晚|p;this morning|今天 早上|p
two days ago|两 天 前|p;three years ago|三 年 前|p;every day|每天|n;every morning|每天 早上|n
every evening|每天 晚上|n;every week|每 周|n;every weekend|每 个 周末|n;on weekends|周末|n
tomorrow|明天|f;tomorrow morning|明天 早上|f;tomorrow evening|明天 晚上|f;next week|下 周|f
next month|下 个 月|f;next year|明年|f;tonight|今晚|f;on Monday|星期一|pf;on Tuesday|星期二|pf
on Wednesday|星期三|pf;on Thursday|星期四|pf;on Friday|星期五|pf;on Saturday|星期六|pf;on Sunday|星期日|pf
in January|一月|pf;in February|二月|pf;in March|三月|pf;in April|四月|pf;in May|五月|pf;in June|六月|pf
in July|七月|pf;in August|八月|pf;in September|九月|pf;in October|十月|pf;in November|十一月|pf
in December|十二月|pf;at noon|中午|pnf;at night|晚上|n;in the afternoon|下午|pnf
"""
